"""engine/judged.py: a pool judged again from its last judgement with other allocations
gives every device the status, and the counters the remainder, that judging it whole
gives; on random pools (counters, overdrawn ones, shares, capacity, taints), for every
release that judges pools apart (1.34 judges them with the world: `fit` judges the
world again there)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from builders import judged_counter_pool

from draview.engine.judged import JudgedDevices, as_judged, device_statuses
from draview.engine.model import AllocRef, EngineOptions
from draview.engine.pool import compute_pool
from draview.engine.profile import make_profile
from draview.explain.index import index_judged

RELEASES = ["1.35", "1.36", "1.37"]
GATES = {"DRAPartitionableDevices": True}


def _allocations(rng: random.Random, names: list[str], shareable: set[str]) -> list[AllocRef]:
    out = []
    for k, name in enumerate(names):
        if rng.random() < 0.45:
            for s in range(rng.randint(1, 2) if name in shareable else 1):
                share = f"s{s}" if name in shareable else None
                consumed = (("bw", str(rng.randint(1, 6))),) if share and rng.random() < 0.5 else ()
                who = rng.choice(["a", "b", f"c{k}"])
                out.append(AllocRef(name, "ns", who, f"uid-{who}", "r", False, share, consumed))
    return out


def _strip(j: JudgedDevices) -> tuple[Any, Any]:
    return j.statuses, dict(j.left)


@pytest.mark.parametrize("release", RELEASES)
def test_judged_again_is_judged_whole(release: str) -> None:
    opts = EngineOptions(profile=make_profile(release, GATES))
    rng = random.Random(f"judged-{release}")
    incremental = 0
    for _ in range(60):
        _, r, names, shareable = judged_counter_pool(rng, opts)
        assert r.prepared is not None
        before = device_statuses(r.key, r.prepared, _allocations(rng, names, shareable), (), opts)
        last = index_judged(r, before)
        for _ in range(6):
            allocations = _allocations(rng, names, shareable)
            again = device_statuses(r.key, r.prepared, allocations, (), opts, before)
            whole = device_statuses(r.key, r.prepared, allocations, (), opts)
            assert _strip(again) == _strip(whole)
            indexed = index_judged(r, again, (), last if again.changed is not None else None)
            fresh = index_judged(r, whole)
            assert [d.status for d in indexed.devices] == [d.status for d in fresh.devices]
            assert [(d.id, d.taints, d.debits) for d in indexed.devices] == [
                (d.id, d.taints, d.debits) for d in fresh.devices
            ]
            incremental += again.changed is not None
            before, last = again, indexed
    assert incremental > 100


@pytest.mark.parametrize("release", RELEASES)
def test_judged_again_from_the_pools_own_judgement(release: str) -> None:
    """fit judges a pool its copies took devices in from the world's judgement of it
    (as_judged): the same statuses as judging it whole with the copies'."""
    opts = EngineOptions(profile=make_profile(release, GATES))
    judged_opts = replace(opts, fragmentation=False)  # as fit judges the world after copies
    rng = random.Random(f"as-judged-{release}")
    seeded = 0
    for _ in range(80):
        _, r, names, shareable = judged_counter_pool(rng, opts)
        assert r.prepared is not None
        world = _allocations(rng, names, shareable)
        own = compute_pool(r.key, r.prepared.slices, world, options=opts, prepared=r.prepared)
        prepared = own.prepared
        assert prepared is not None
        before = as_judged(own, world, (), judged_opts)
        if before is None:
            continue
        assert before.changed is None
        assert _strip(before) == _strip(device_statuses(r.key, prepared, world, (), judged_opts))
        copies = [*world, *_allocations(rng, names, shareable)]
        again = device_statuses(r.key, prepared, copies, (), judged_opts, before)
        assert _strip(again) == _strip(device_statuses(r.key, prepared, copies, (), judged_opts))
        seeded += again.changed is not None
    assert seeded > 20
