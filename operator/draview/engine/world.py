"""Compute every pool of a snapshot: what `draview analyze` prints."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from draview.api.world import World
from draview.engine.allocations import index_allocations
from draview.engine.model import EngineOptions, PoolKey
from draview.engine.objects import result_objects
from draview.engine.pool import PoolResult, compute_pool
from draview.engine.pools import group_slices


def compute_world(world: World, options: EngineOptions | None = None) -> list[PoolResult]:
    """Results for every pool, sorted by (driver, pool)."""
    by_pool = group_slices(world.slices)
    problems: dict[PoolKey, list[str]] = defaultdict(list)
    for p in world.problems:
        if p.pool is not None:
            problems[p.pool].append(str(p))
    allocations = index_allocations(world.claims)
    # A pool whose every slice is unreadable still shows, invalid: its devices are not
    # allocatable, and vanishing would hide that from whoever watches the pool.
    unreadable = {p.pool for p in world.problems if p.pool and p.kind == "ResourceSlice"}
    keys = sorted(by_pool.keys() | unreadable)
    return [
        compute_pool(
            key,
            by_pool.get(key, []),
            allocations.get(key, ()),
            world.taint_rules,
            problems.get(key, ()),
            options,
            nodes=world.nodes,
        )
        for key in keys
    ]


def world_objects(world: World, options: EngineOptions | None = None) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for result in compute_world(world, options):
        objects.extend(result_objects(result))
    pools = [o for o in objects if o["kind"] == "ResourcePoolStatus"]
    slices = [o for o in objects if o["kind"] != "ResourcePoolStatus"]
    pools.sort(key=lambda o: o["metadata"]["name"])
    slices.sort(key=lambda o: o["metadata"]["name"])
    return pools + slices
