"""A capacity probe is asked on the pools it depends on alone (explain/probes.py): those
holding a device its selectors match or fail on, those the allocator aborts on, and
every pool for a request of all matching devices. On
random worlds of every profile, `fit` on those pools gives what `fit` on the whole world
gives: copies, the range, per-node copies and the first copy's devices."""

from __future__ import annotations

from typing import Any

import pytest
from tests.fidelity.fit_harness import COUNT, workload_of, workloads
from tests.fidelity.served import served_world
from tests.fidelity.test_profiles import VERIFIED
from tests.fidelity.worldgen import generate

from draview.api.world import World, build_world
from draview.cel import CelEngine
from draview.engine.allocations import index_allocations
from draview.engine.model import EngineOptions
from draview.engine.pools import group_slices
from draview.engine.world import compute_world
from draview.explain.fit import FitError, FitResult, fit
from draview.explain.probes import every_pool, pool_relevant, selectors

SEEDS = 8


def _shape(r: FitResult) -> tuple[Any, ...]:
    nodes = sorted((n.name or "", n.copies, n.max_copies, n.devices, n.error) for n in r.nodes)
    return (r.copies, r.max_copies, r.bounded, r.stopped, r.first_node, r.first, nodes)


def _subset(world: World, keys: set[tuple[str, str]]) -> World:
    """The pools a probe asks about, as the operator hands them: no claims, their
    allocations apart (fit's `allocations`)."""
    return World(
        slices=[s for s in world.slices if s.pool_key in keys],
        taint_rules=world.taint_rules,
        classes=world.classes,
        problems=[p for p in world.problems if p.pool is None or p.pool in keys],
        nodes=world.nodes,
    )


@pytest.mark.parametrize("name", sorted(VERIFIED))
def test_fit_on_the_pools_a_probe_depends_on_is_fit_on_all(name: str) -> None:
    profile, _ = VERIFIED[name]
    opts = EngineOptions(profile=profile)
    asked = left_out = 0
    for seed in range(SEEDS):
        served = served_world(generate(seed), profile)
        world = build_world(served.objects)
        results = compute_world(world, opts)
        by_pool = group_slices(world.slices)
        classes = {c.name: c for c in world.classes}
        for claims in workloads(served.pending):
            workload = workload_of(claims)
            try:
                whole = fit(world, workload, opts, count=COUNT, results=results)
            except FitError:
                continue
            sels = selectors(workload, classes)
            cel = CelEngine()
            keys = {
                r.key
                for r in results
                if every_pool(workload)
                or r.errors.allocator
                or pool_relevant(sels, by_pool.get(r.key, []), cel)
            }
            allocations = index_allocations(world.claims)
            part = fit(
                _subset(world, keys),
                workload,
                opts,
                count=COUNT,
                results=[r for r in results if r.key in keys],
                allocations={k: v for k, v in allocations.items() if k in keys},
            )
            assert _shape(part) == _shape(whole), f"seed {seed} {workload.claims[0].name}"
            asked += 1
            left_out += len(results) - len(keys)
    assert asked > 3 * SEEDS, "too few workloads asked to judge"
    assert left_out > 0, "no pool was left out: the comparison shows nothing"
