"""Gather a pool's slices the way the allocator does: newest generation only."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from draview.api.slices import ResourceSlice
from draview.engine.model import PoolKey


@dataclass(frozen=True, slots=True)
class PoolSlices:
    key: PoolKey
    generation: int
    current: tuple[ResourceSlice, ...]  # sorted by name
    stale: tuple[ResourceSlice, ...]  # sorted by name
    expected: int  # resourceSliceCount of the current generation
    counts: tuple[int, ...]  # every distinct resourceSliceCount seen at that generation

    @property
    def complete(self) -> bool:
        return len(self.current) == self.expected

    @property
    def first_slice(self) -> str:
        """The slice that carries the seed's `poolStatus`: first current one by name."""
        return (self.current or self.stale)[0].name


def gather_pool(key: PoolKey, slices: Iterable[ResourceSlice]) -> PoolSlices:
    ordered = sorted(slices, key=lambda s: s.name)
    generation = max((s.pool.generation for s in ordered), default=0)
    current = tuple(s for s in ordered if s.pool.generation == generation)
    stale = tuple(s for s in ordered if s.pool.generation != generation)
    counts = tuple(sorted({s.pool.resource_slice_count for s in current}))
    # The allocator trusts one slice's count; when they disagree draview reports it and
    # expects the largest, so a pool never looks complete by accident.
    expected = counts[-1] if counts else 0
    return PoolSlices(key, generation, current, stale, expected, counts)


def group_slices(slices: Iterable[ResourceSlice]) -> dict[PoolKey, list[ResourceSlice]]:
    out: dict[PoolKey, list[ResourceSlice]] = defaultdict(list)
    for s in slices:
        out[s.pool_key].append(s)
    return dict(out)
