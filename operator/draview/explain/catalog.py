"""What explanations of pending claims read of every judged pool, kept up to date a pool
at a time: the pools with their status bodies, their devices indexed (DeviceIndex), the
pools each node gathers (GatherIndex) and the pools whose slices disagree on
resourceSliceCount. Built from scratch for every round, it would cost as much as the
cluster is large; the operator puts only the pools judged since its last round."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from draview.api.taints import DeviceTaintRule
from draview.engine.model import PoolKey
from draview.engine.pool import PoolResult
from draview.explain.gather import Assignment, GatherIndex, ambiguous_pool
from draview.explain.index import DeviceIndex


class Catalog:
    def __init__(self, rules: Sequence[DeviceTaintRule] = ()) -> None:
        # Devices are indexed with their taints as these rules make them.
        self.rules: tuple[DeviceTaintRule, ...] = tuple(rules)
        self.results: dict[PoolKey, PoolResult] = {}
        self.devices = DeviceIndex()
        self.gather = GatherIndex()
        self.shaky: dict[PoolKey, list[Assignment]] = {}

    @classmethod
    def build(cls, results: Iterable[PoolResult], rules: Sequence[DeviceTaintRule] = ()) -> Catalog:
        catalog = cls(rules)
        for r in results:
            catalog.put(r)
        return catalog

    def put(self, result: PoolResult, keep: PoolResult | None = None) -> None:
        """`result` in place of what its pool had (a new pool goes last). `keep`: the
        same judgement without its status bodies, held in their place (the search reads
        only the prepared views and allocations; the index keeps each device's status):
        held for good, the bodies were most of a catalog's memory."""
        key = result.key
        self.results[key] = keep or result
        self.devices.put(result, self.rules)
        self.gather.put(result)
        found = ambiguous_pool(result)
        if found is None:
            self.shaky.pop(key, None)
        else:
            self.shaky[key] = found

    def drop(self, key: PoolKey) -> None:
        self.results.pop(key, None)
        self.devices.drop(key)
        self.gather.drop(key)
        self.shaky.pop(key, None)

    def __len__(self) -> int:
        return len(self.results)
