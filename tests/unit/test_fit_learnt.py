"""What searches and explanations learn of a pool's slices once and keep with them
(PreparedPool.walk_checks and index_checks, PoolResult.lefts): asking again
after a claim change reads it, and answers as a new question would."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import (
    claim,
    counter_pool,
    device,
    device_class,
    result,
    rslice,
    taint_rule,
    world,
)

from draview.api.workload import read_workload
from draview.api.world import World, build_world, iter_objects
from draview.cel import CelEngine
from draview.engine.model import EngineOptions, PoolKey
from draview.engine.pool import PoolResult
from draview.engine.profile import make_profile
from draview.engine.rules import as_read, rules_for
from draview.engine.verdict import counters_left
from draview.engine.world import compute_world
from draview.explain.fit import FitResult, fit
from draview.explain.fit_memo import FitMemo
from draview.explain.fit_search import Question, merge_claims
from draview.explain.gather import GatherIndex, node_pools
from draview.explain.index import DeviceIndex
from draview.explain.why import Explainer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RELEASES = ["1.34", "1.35", "1.36", "1.37"]
MODEL_A = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    # No attribute on a device: a CEL runtime error there, which the scheduler fails
    # the claim on when its walk meets that device free.
    "spec": {
        "selectors": [{"cel": {"expression": "device.attributes['gpu.example.com'].model == 'A'"}}]
    },
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "default"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
            }
        }
    },
}
ALLOCATED = claim("busy", result("gpu-1", pool="node-a"))


def nobody(kind: str, namespace: str, name: str) -> None:
    return None


def _with_claims(w: World, *claims: dict[str, Any]) -> World:
    """`w` with these claims: the same slice objects, so the pools' prepared slices and
    what was learnt of them are the ones kept, as in the operator."""
    return replace(w, claims=world(*claims).claims)


def _answer(got: FitResult) -> tuple[int, int | None, str, str]:
    return got.copies, got.max_copies, got.stopped, got.blocker


@pytest.mark.parametrize("busy_first", [True, False])
def test_a_selector_error_is_met_where_the_walk_meets_the_device_free(busy_first: bool) -> None:
    """gpu-1 makes the class's selector fail with an error: taken by a claim, the walk
    passes it unevaluated; free, the next copy fails on it. Whichever state the pool's
    devices were first walked in, the other is answered as a new question answers it."""
    devices = [device("gpu-0", model="A"), device("gpu-1")]
    slices = world(MODEL_A, rslice("a", devices, pool="node-a", node="node-a"))
    busy, free = _with_claims(slices, ALLOCATED), _with_claims(slices)
    order = [busy, free] if busy_first else [free, busy]
    w = read_workload([TEMPLATE], nobody)
    memo = FitMemo()
    results: list[PoolResult] = compute_world(order[0])
    first = fit(order[0], w, results=results, memo=memo)
    prepared = results[0].prepared
    assert prepared is not None and prepared.walk_checks  # learnt by the first asking
    again = compute_world(order[1], None, results, {("gpu.example.com", "node-a")})
    assert again[0].prepared is prepared  # the slices are the same: so is what was learnt
    second = fit(order[1], w, results=again, memo=memo)
    for got, asked in ((first, order[0]), (second, order[1])):
        assert _answer(got) == _answer(fit(asked, w))
    by_state = {id(busy): (1, 1, "unallocatable"), id(free): (1, 1, "aborts")}
    assert _answer(first)[:3] == by_state[id(order[0])]
    assert _answer(second)[:3] == by_state[id(order[1])]


def test_an_explanation_folds_a_pool_again_from_what_it_learnt() -> None:
    """The second fold of a pool's slices reads what the selectors answered for each
    device from the first: the same explanation, runtime errors included."""
    slices = world(
        MODEL_A,
        rslice(
            "a",
            [device("gpu-0", model="A"), device("gpu-1"), device("gpu-2", model="B")],
            pool="node-a",
            node="node-a",
        ),
    )
    w = _with_claims(slices, ALLOCATED)
    results = compute_world(w)
    prepared = results[0].prepared
    assert prepared is not None
    pending = world(claim("pending")).claims[0]
    explained = []
    for _ in range(2):
        index = DeviceIndex.build(results)
        explained.append(Explainer().explain(pending, index, w.classes))
    assert list(prepared.index_checks.values()) == [bytes([1, 2, 0])]  # match, error, miss
    first, second = explained
    assert second.summary == first.summary
    choice = second.requests[0].choices[0]
    assert list(choice.runtime_errors) == ["gpu.example.com/node-a/gpu-1"]
    assert (choice.matched, list(choice.free)) == (1, ["gpu.example.com/node-a/gpu-0"])


def _examples() -> list[World]:
    worlds = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        objects = list(iter_objects(yaml.safe_load_all(path.read_text())))
        if any(o.get("kind") == "ResourceSlice" for o in objects):
            worlds.append(build_world(objects))
    return worlds


@pytest.mark.parametrize("release", RELEASES)
def test_what_a_judgement_leaves_of_the_counters_is_what_a_search_counts(release: str) -> None:
    """PoolResult.lefts, which searches of the same allocations read in place of
    counting again, is counters_left of each view's parse: on every example and a pool
    whose counters claims overdraw, for every release."""
    # Partitionable devices are off by default before 1.36.
    opts = EngineOptions(profile=make_profile(release, {"DRAPartitionableDevices": True}))
    names = ["gpu-0", "gpu-1", "gpu-2"]
    overdrawn = world(
        *_counter_pool(names),
        *(claim(f"c{i}", result(d, pool="p")) for i, d in enumerate(names)),
    )
    checked = 0
    for w in [*_examples(), overdrawn]:
        for r in compute_world(w, opts):
            if r.prepared is None or r.allocated is None:
                continue
            for view in r.prepared.views:
                for o in view.outcomes:
                    if o.kind == "ok" and o.parsed is not None and o.parsed.counter_totals:
                        assert r.lefts is not None
                        assert dict(r.lefts[id(o.parsed)]) == counters_left(o.parsed, r.allocated)
                        checked += 1
    assert checked > 3


def _counter_pool(names: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A pool of devices taking 4Gi each of one 8Gi counter."""
    devices = [device(n, counters={"gpu": {"memory": "4Gi"}}) for n in names]
    return counter_pool("p", devices, {"gpu": {"memory": "8Gi"}}, pool="p", node="node-a")


def test_a_search_reads_the_judgements_counters_for_the_pools_own_allocations() -> None:
    """The question hands its searches the engine's counters for a pool's state as
    judged (the same mapping), and works out those of a state the copies made."""
    w = world(MODEL_A, *_counter_pool(["gpu-0", "gpu-1"]))
    w = replace(w, classes=world(device_class()).classes)
    results = compute_world(w)
    rules = rules_for(EngineOptions().profile)
    claims = read_workload([TEMPLATE], nobody).claims
    merged = merge_claims([as_read(c, rules) for c in claims])
    q = Question(w, results, {}, rules, merged, merged, 100, CelEngine())
    pool = q.pools("node-a", 0)[0]
    assert pool.parsed is not None
    key: PoolKey = ("gpu.example.com", "p")
    assert results[0].key == key and results[0].lefts is not None
    assert q.left_of(pool.parsed, pool.allocated) is results[0].lefts[id(pool.parsed)]
    found = q.outcomes("node-a", 0, (0, ()))
    assert found[0][0] == "ok"
    taken = found[0][1]
    assert isinstance(taken, tuple)
    after = q.pools_at("node-a", 0, taken)[0]
    left = q.left_of(pool.parsed, after.allocated)
    assert left == counters_left(pool.parsed, after.allocated)
    assert left != results[0].lefts[id(pool.parsed)]


def test_a_slices_devices_are_kept_for_the_taint_rules_they_were_built_with() -> None:
    """The devices a walk meets are built once per view's slice and kept with it: a
    caller handing the same rules as a list or a tuple reads the same ones; other
    rules build them again (a rule taints devices)."""
    w = world(device_class(), rslice("a", [device("gpu-0"), device("gpu-1")], node="node-a"))
    gather = GatherIndex.build(compute_world(w))
    first = node_pools("node-a", gather, [])[0].slices[0]
    assert node_pools("node-a", gather, ())[0].slices[0] is first
    rule = world(taint_rule("broken", device="gpu-1")).taint_rules
    tainted = node_pools("node-a", gather, tuple(rule))[0].slices[0]
    assert tainted is not first
    assert [d.taints != () for d in tainted] == [False, True]
    assert node_pools("node-a", gather, list(rule))[0].slices[0] is tainted
