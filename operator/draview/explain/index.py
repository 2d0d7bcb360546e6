"""Every current-generation device of every pool with what the engine decided about it,
kept per pool so that a pool judged again is indexed again on its own."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain

from draview.api.slices import Device, ResourceSlice, Taint
from draview.api.status import DeviceStatus
from draview.api.taints import DeviceTaintRule
from draview.engine.flatten import FlatSlice, flatten_slice
from draview.engine.judged import JudgedDevices
from draview.engine.model import PoolKey
from draview.engine.pool import PoolResult
from draview.engine.taints import effective_taints
from draview.engine.validate import CounterKey, ParsedPool, parse_pool
from draview.quantity import QuantityError, parse_quantity


# Not frozen, though never changed once built: one is built per device of every pool
# indexed, and a frozen dataclass's __init__ costs five times as much.
@dataclass(slots=True, unsafe_hash=True)
class IndexedDevice:
    driver: str
    pool: str
    generation: int
    slice: ResourceSlice
    device: Device  # flattened: mixins applied
    status: DeviceStatus
    taints: tuple[Taint, ...]
    # What one allocation debits from the pool's counters, in nanos, summed per counter
    # (ParsedPool.nanos, as the engine's verdicts read it).
    debits: tuple[tuple[CounterKey, int], ...] = ()
    pool_complete: bool = True
    pool_valid: bool = True

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device.name}"

    @property
    def cache_key(self) -> tuple[str, str, str, int, str]:
        # A device's CEL result can only change with its slice's generation; the same key
        # as the search's (explain/gather.py SearchDevice.cel_key), so that the two share
        # one evaluation per device.
        return (self.driver, self.pool, self.slice.name, self.slice.generation, self.device.name)


@dataclass(slots=True)
class PoolDevices:
    """One pool's devices, and what is left of its counters (counter set, counter), in
    nanos: compared for every device a claim is explained on."""

    devices: list[IndexedDevice]
    remaining: Mapping[CounterKey, int]
    # When `devices` are every device of the pool's current slices in order: what a
    # request's selectors answer for each, kept with the prepared slices (why.py
    # `_fold`).
    checks: dict[object, bytes] | None = None
    # With `checks`: where the devices that debit each counter set sit (`debiting`).
    sets: list[dict[str, list[int]]] | None = None

    def debiting(self, sets: Iterable[str]) -> set[int]:
        """The places of the devices that debit any of the counter sets; a place per
        device that debits something when the map is not kept (no `sets`)."""
        if self.sets is None:
            return {i for i, d in enumerate(self.devices) if d.debits}
        if not self.sets:
            by_set: dict[str, list[int]] = {}
            for i, d in enumerate(self.devices):
                for name in {ckey[0] for ckey, _ in d.debits}:
                    by_set.setdefault(name, []).append(i)
            self.sets.append(by_set)
        found = self.sets[0]
        return {i for name in sets for i in found.get(name, ())}

    def counters_fit(self, d: IndexedDevice) -> bool:
        """Whether what is left of the counters covers what the device (of this pool)
        debits."""
        remaining = self.remaining
        for ckey, need in d.debits:
            left = remaining.get(ckey)
            if left is not None and left < need:
                return False
        return True


def index_pool(result: PoolResult, rules: Sequence[DeviceTaintRule] = ()) -> PoolDevices:
    statuses = {sr.slice.name: {d["name"]: d for d in sr.status["devices"]} for sr in result.slices}
    remaining: dict[CounterKey, int] = {}
    for cs in result.status.get("counterSets", []):
        for counter, usage in cs["counters"].items():
            try:
                remaining[(cs["name"], counter)] = parse_quantity(usage["available"]).nanos
            except QuantityError:
                continue
    # The engine kept the flattened, parsed newest slices with the result.
    prepared = result.prepared
    if prepared is not None:
        flat, parsed = prepared.current, prepared.parsed
    else:
        flat = [flatten_slice(s) for s in result.pool.current]
        parsed = parse_pool(flat)
    by_slice = []
    for fs in flat:
        of_slice = statuses.get(fs.slice.name)
        if of_slice is not None:
            by_slice.append((fs, [of_slice.get(dev.name) for dev in fs.devices]))
    return _pool_devices(result, by_slice, parsed, remaining, rules)


def index_judged(
    result: PoolResult,
    judged: JudgedDevices,
    rules: Sequence[DeviceTaintRule] = (),
    before: PoolDevices | None = None,
) -> PoolDevices:
    """index_pool of the pool of `result` judged again with other allocations
    (device_statuses): the statuses and counters as the engine has them, not read back
    from a rendered status. `before`: this function's answer for the judgement
    `judged` was made from (JudgedDevices.changed), with the same rules: only the
    devices judged again are indexed again."""
    prepared = result.prepared
    if prepared is None:
        raise ValueError(f"pool {result.key}: judged without its prepared slices")
    changed = judged.changed
    if before is not None and changed is not None and before.checks is prepared.index_checks:
        # Every current device in order (PoolDevices.checks says so), of the same slices.
        devices = list(before.devices)
        starts = list(accumulate((len(fs.devices) for fs in prepared.current), initial=0))
        for i, j in changed:
            d = devices[starts[i] + j]
            devices[starts[i] + j] = IndexedDevice(
                d.driver,
                d.pool,
                d.generation,
                d.slice,
                d.device,
                judged.statuses[i][j],
                d.taints,
                d.debits,
                d.pool_complete,
                d.pool_valid,
            )
        return PoolDevices(devices, judged.left, before.checks, before.sets)
    by_slice = list(zip(prepared.current, judged.statuses, strict=True))
    return _pool_devices(result, by_slice, prepared.parsed, judged.left, rules)


def _pool_devices(
    result: PoolResult,
    by_slice: Sequence[tuple[FlatSlice, Sequence[DeviceStatus | None]]],
    parsed: ParsedPool,
    remaining: Mapping[CounterKey, int],
    rules: Sequence[DeviceTaintRule],
) -> PoolDevices:
    """Each device of the slices with its status (in the slice's device order; None: the
    status does not show it)."""
    driver, pool = result.key
    prepared = result.prepared
    everyone = prepared is not None and len(by_slice) == len(prepared.current)
    # 1.34 hands out the devices of a pool that looks incomplete.
    complete = result.pool.complete or (
        prepared is not None and not prepared.rules.incomplete_pools_refused
    )
    valid = not result.errors.allocator
    generation = result.pool.generation
    nanos = parsed.nanos().get
    devices = []
    for fs, statuses in by_slice:
        for dev, st in zip(fs.devices, statuses, strict=True):
            if st is None:
                everyone = False
                continue
            devices.append(
                IndexedDevice(
                    driver,
                    pool,
                    generation,
                    fs.slice,
                    dev,
                    st,
                    effective_taints(driver, pool, dev, rules),
                    nanos(dev.name, ()),
                    complete,
                    valid,
                )
            )
    if not everyone or prepared is None:
        return PoolDevices(devices, remaining)
    return PoolDevices(devices, remaining, prepared.index_checks, prepared.index_sets)


@dataclass(slots=True)
class DeviceIndex:
    """Per pool, in the order the pools were first put."""

    pools: dict[PoolKey, PoolDevices] = field(default_factory=dict)
    # The profile works capacity ranges in milli-units (rules.fractional_capacity_range).
    fractional: bool = False
    # The pools whose entries were replaced, in turn, since the pools last came or went
    # (`shape` then moves on): a reader that saw the entries at some length of the log
    # reads only what followed, where comparing every entry would touch a thousand
    # pools to find the one a claim changed (why's kept folds). Cleared, moving `shape`
    # on, when it grows past the pools.
    log: list[PoolKey] = field(default_factory=list)
    shape: int = 0

    @classmethod
    def build(
        cls, results: Sequence[PoolResult], rules: Sequence[DeviceTaintRule] = ()
    ) -> DeviceIndex:
        index = cls()
        for result in results:
            index.put(result, rules)
        return index

    def put(self, result: PoolResult, rules: Sequence[DeviceTaintRule] = ()) -> None:
        """Index `result`'s devices in place of what its pool had."""
        self.add(result, index_pool(result, rules))

    def add(self, result: PoolResult, devices: PoolDevices) -> None:
        """Put `devices`, index_pool of `result` (or of the same pool with other
        allocations), in place of what its pool had."""
        key = result.key
        had = self.pools.get(key)
        if had is not devices:
            self.pools[key] = devices
            if had is None or len(self.log) > len(self.pools) + 64:
                self.shape += 1
                self.log.clear()
            else:
                self.log.append(key)
        if result.prepared is not None:
            self.fractional = result.prepared.rules.fractional_capacity_range

    def drop(self, key: PoolKey) -> None:
        if self.pools.pop(key, None) is not None:
            self.shape += 1
            self.log.clear()

    @property
    def devices(self) -> Iterator[IndexedDevice]:
        return chain.from_iterable(p.devices for p in self.pools.values())

    def __len__(self) -> int:
        return sum(len(p.devices) for p in self.pools.values())
