"""Every current-generation device of every pool with what the engine decided about it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from draview.api.slices import Device, ResourceSlice, Taint
from draview.api.status import DeviceStatus
from draview.api.taints import DeviceTaintRule
from draview.engine.flatten import flatten_slice
from draview.engine.pool import PoolResult
from draview.engine.taints import effective_taints
from draview.engine.validate import CounterKey, parse_pool
from draview.quantity import Quantity, QuantityError, parse_quantity


@dataclass(frozen=True, slots=True)
class IndexedDevice:
    driver: str
    pool: str
    generation: int
    slice: ResourceSlice
    device: Device  # flattened: mixins applied
    status: DeviceStatus
    taints: tuple[Taint, ...]
    # what one allocation debits from the pool's counters, and what is left of those
    debits: tuple[tuple[CounterKey, Quantity], ...] = ()
    pool_complete: bool = True
    pool_valid: bool = True

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device.name}"

    @property
    def cache_key(self) -> tuple[str, str, int, str, str]:
        # A device's CEL result can only change with its pool's generation.
        return (self.driver, self.pool, self.generation, self.slice.name, self.device.name)


@dataclass(slots=True)
class DeviceIndex:
    devices: list[IndexedDevice] = field(default_factory=list)
    remaining: dict[tuple[str, str, CounterKey], Quantity] = field(default_factory=dict)
    # The profile works capacity ranges in milli-units (rules.fractional_capacity_range).
    fractional: bool = False

    @classmethod
    def build(
        cls, results: Sequence[PoolResult], rules: Sequence[DeviceTaintRule] = ()
    ) -> DeviceIndex:
        index = cls()
        for result in results:
            driver, pool = result.key
            statuses = {
                sr.slice.name: {d["name"]: d for d in sr.status["devices"]} for sr in result.slices
            }
            for cs in result.status.get("counterSets", []):
                for counter, usage in cs["counters"].items():
                    try:
                        left = parse_quantity(usage["available"])
                    except QuantityError:
                        continue
                    index.remaining[(driver, pool, (cs["name"], counter))] = left
            # The engine kept the flattened, parsed newest slices with the result.
            prepared = result.prepared
            if prepared is not None:
                flat, parsed = prepared.current, prepared.parsed
                index.fractional = prepared.rules.fractional_capacity_range
            else:
                flat = [flatten_slice(s) for s in result.pool.current]
                parsed = parse_pool(flat)
            # 1.34 hands out the devices of a pool that looks incomplete.
            complete = result.pool.complete or (
                prepared is not None and not prepared.rules.incomplete_pools_refused
            )
            valid = not result.errors.allocator
            for fs in flat:
                for dev in fs.devices:
                    st = statuses.get(fs.slice.name, {}).get(dev.name)
                    if st is None:
                        continue
                    index.devices.append(
                        IndexedDevice(
                            driver=driver,
                            pool=pool,
                            generation=result.pool.generation,
                            slice=fs.slice,
                            device=dev,
                            status=st,
                            taints=tuple(effective_taints(driver, pool, dev, rules)),
                            debits=tuple(parsed.consumption.get(dev.name, ())),
                            pool_complete=complete,
                            pool_valid=valid,
                        )
                    )
        return index

    def counters_fit(self, d: IndexedDevice) -> bool:
        for ckey, need in d.debits:
            left = self.remaining.get((d.driver, d.pool, ckey))
            if left is not None and left < need:
                return False
        return True
