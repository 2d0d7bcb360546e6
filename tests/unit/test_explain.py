"""`why`: what blocks each request of a pending claim."""

from __future__ import annotations

from typing import Any

import pytest
from builders import (
    DRIVER,
    claim,
    counter_pool,
    device,
    device_class,
    result,
    rslice,
    taint_rule,
    world,
)

from draview.api.claims import ResourceClaim
from draview.engine.model import EngineOptions
from draview.engine.profile import DEFAULT, make_profile
from draview.engine.world import compute_world
from draview.explain import DeviceIndex, Explainer

CLASS = device_class()
BROKEN = {"key": "example.com/xid", "value": "79", "effect": "NoSchedule"}


def pending(name: str, *requests: dict[str, Any], constraints: Any = None) -> ResourceClaim:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return ResourceClaim.from_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": devices},
        }
    )


def req(name: str = "gpu", *selectors: str, **exactly: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": "gpu.example.com", **exactly}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}


@pytest.fixture
def setup() -> tuple[Explainer, DeviceIndex, Any]:
    w = world(
        CLASS,
        rslice(
            "node-a",
            [
                device("gpu-0", model="H100", clique="a"),
                device("gpu-1", model="A100", clique="a"),
                device("gpu-2", model="A100", clique="b", taints=[BROKEN]),
                device("gpu-3", model="A100", clique="b", capacity={"memory": "40Gi"}),
            ],
        ),
        rslice("node-b", [device("gpu-0", model="L4", clique="c")], pool="pool-b", node="node-b"),
        claim("train", result("gpu-0")),
    )
    index = DeviceIndex.build(compute_world(w), w.taint_rules)
    return Explainer(), index, w.classes


def test_model_only_on_an_allocated_device(setup: Any) -> None:
    ex, index, classes = setup
    c = pending("want-h100", req("gpu", "device.attributes['gpu.example.com'].model == 'H100'"))
    exp = ex.explain(c, index, classes)
    choice = exp.requests[0].choices[0]
    assert exp.verdict == "Unallocatable"
    assert choice.matched == 1 and choice.free == []
    assert choice.blocked == {"Allocated": [f"{DRIVER}/pool-a/gpu-0"]}
    assert "default/train" in choice.details[f"{DRIVER}/pool-a/gpu-0"]
    assert exp.summary == "request gpu: needs 1, 0 of 1 matching device free (1 Allocated)"


def test_taint_blocks_unless_tolerated(setup: Any) -> None:
    ex, index, classes = setup
    sel = "device.attributes['gpu.example.com'].clique == 'b'"
    exp = ex.explain(pending("t", req("gpu", sel, count=2)), index, classes)
    choice = exp.requests[0].choices[0]
    assert choice.blocked == {"Tainted": [f"{DRIVER}/pool-a/gpu-2"]}
    assert (
        "example.com/xid=79:NoSchedule not tolerated"
        in choice.details[choice.blocked["Tainted"][0]]
    )
    tolerate = [{"key": "example.com/xid", "operator": "Exists", "effect": "NoSchedule"}]
    exp = ex.explain(pending("t", req("gpu", sel, count=2, tolerations=tolerate)), index, classes)
    assert exp.requests[0].satisfiable and exp.verdict == "MaybeAllocatable"
    wrong = [{"key": "example.com/xid", "operator": "Equal", "value": "80"}]
    exp = ex.explain(pending("t", req("gpu", sel, count=2, tolerations=wrong)), index, classes)
    assert not exp.requests[0].satisfiable


def test_runtime_error_on_any_device_fails_the_claim(setup: Any) -> None:
    ex, index, classes = setup
    c = pending("err", req("gpu", "device.attributes['gpu.example.com'].memory == '1'"))
    exp = ex.explain(c, index, classes)
    assert exp.verdict == "Error"
    assert "CEL runtime error" in exp.summary and "scheduler fails the claim" in exp.summary
    guarded = "'memory' in device.attributes['gpu.example.com']"
    assert ex.explain(pending("ok", req("gpu", guarded)), index, classes).verdict == "Unallocatable"


def test_count_spread_over_nodes(setup: Any) -> None:
    ex, index, classes = setup
    exp = ex.explain(pending("many", req("gpu", count=3)), index, classes)
    # gpu-1 and gpu-3 on node-a, gpu-0 on node-b: three free, never three on one node.
    choice = exp.requests[0].choices[0]
    assert len(choice.free) == 3 and not choice.satisfiable
    assert "at most 2 on any one node" in choice.reason
    exp = ex.explain(pending("many", req("gpu", count=4)), index, classes)
    assert exp.requests[0].choices[0].reason.startswith("needs 4, 3 of 5 matching devices free")


def test_all_mode_needs_every_device(setup: Any) -> None:
    ex, index, classes = setup
    exp = ex.explain(pending("all", req("gpu", allocationMode="All")), index, classes)
    assert "allocationMode All" in exp.summary and exp.verdict == "Unallocatable"


def test_capacity_request_too_large(setup: Any) -> None:
    ex, index, classes = setup
    sel = "device.attributes['gpu.example.com'].clique == 'b'"
    big = {"requests": {"memory": "80Gi"}}
    exp = ex.explain(pending("cap", req("gpu", sel, capacity=big)), index, classes)
    choice = exp.requests[0].choices[0]
    assert "CapacityTooSmall" in choice.blocked
    assert "40Gi" in choice.details[f"{DRIVER}/pool-a/gpu-3"]


def test_first_available_takes_the_first_fitting_subrequest(setup: Any) -> None:
    ex, index, classes = setup
    r = {
        "name": "gpu",
        "firstAvailable": [
            {
                "name": "h100",
                "deviceClassName": "gpu.example.com",
                "selectors": [
                    {"cel": {"expression": "device.attributes['gpu.example.com'].model == 'H100'"}}
                ],
            },
            {"name": "any", "deviceClassName": "gpu.example.com"},
        ],
    }
    exp = ex.explain(pending("fa", r), index, classes)
    assert [c.request for c in exp.requests[0].choices] == ["gpu/h100", "gpu/any"]
    assert exp.requests[0].chosen is not None and exp.requests[0].chosen.request == "gpu/any"


def test_match_attribute_across_requests(setup: Any) -> None:
    ex, index, classes = setup
    a100 = "device.attributes['gpu.example.com'].model == 'A100'"
    c = pending(
        "pair",
        req("one", a100),
        req("two", "device.attributes['gpu.example.com'].model == 'L4'"),
        constraints=[{"requests": ["one", "two"], "matchAttribute": "gpu.example.com/clique"}],
    )
    exp = ex.explain(c, index, classes)
    assert exp.verdict == "Unallocatable"
    assert exp.constraint_problems and "matchAttribute gpu.example.com/clique" in exp.summary


def test_missing_class_and_bad_selector(setup: Any) -> None:
    ex, index, classes = setup
    missing = {"name": "gpu", "exactly": {"deviceClassName": "nope"}}
    assert (
        "DeviceClass 'nope' not found" in ex.explain(pending("m", missing), index, classes).summary
    )
    exp = ex.explain(pending("b", req("gpu", "device.driver ==")), index, classes)
    assert exp.verdict == "Error" and "does not compile" in exp.summary


def test_node_reach(setup: Any) -> None:
    ex, index, classes = setup
    exp = ex.explain(pending("n", req("gpu")), index, classes, node="node-b")
    choice = exp.requests[0].choices[0]
    assert choice.free == [f"{DRIVER}/pool-b/gpu-0"]
    assert len(choice.blocked["NodeUnreachable"]) == 4


def test_taint_rule_and_counters() -> None:
    w = world(
        CLASS,
        *counter_pool(
            "s",
            [
                device("big", counters={"cs": {"mem": "8Gi"}}),
                device("small-0", counters={"cs": {"mem": "4Gi"}}),
                device("small-1", counters={"cs": {"mem": "4Gi"}}),
            ],
            {"cs": {"mem": "8Gi"}},
        ),
        claim("c", result("small-0")),
        taint_rule("r", device="small-1"),
    )
    index = DeviceIndex.build(compute_world(w), w.taint_rules)
    exp = Explainer().explain(pending("p", req("gpu")), index, w.classes)
    blocked = exp.requests[0].choices[0].blocked
    assert blocked == {
        "Allocated": [f"{DRIVER}/pool-a/small-0"],
        "InsufficientSharedCapacity": [f"{DRIVER}/pool-a/big"],
        "Tainted": [f"{DRIVER}/pool-a/small-1"],
    }


def test_a_counter_set_named_twice_debits_the_sum() -> None:
    # Each entry fits what is left (3 of 4) but both together do not: the engine counts
    # the sum (ParsedPool.needs), and so must `why` (the index keeps the summed needs).
    twice = device("twice")
    twice["consumesCounters"] = [
        {"counterSet": "cs", "counters": {"mem": {"value": "3"}}},
        {"counterSet": "cs", "counters": {"mem": {"value": "3"}}},
    ]
    w = world(CLASS, *counter_pool("s", [twice, device("plain")], {"cs": {"mem": "4"}}))
    results = compute_world(w)
    states = {
        d["name"]: d.get("stateReason") for s in results[0].slices for d in s.status["devices"]
    }
    assert states["twice"] == "InsufficientSharedCapacity"
    index = DeviceIndex.build(results, w.taint_rules)
    choice = Explainer().explain(pending("p", req("gpu")), index, w.classes).requests[0].choices[0]
    assert choice.free == [f"{DRIVER}/pool-a/plain"]
    assert choice.blocked == {"InsufficientSharedCapacity": [f"{DRIVER}/pool-a/twice"]}


def test_incomplete_pool() -> None:
    w = world(CLASS, rslice("s", [device("gpu-0")], count=2))
    index = DeviceIndex.build(compute_world(w), w.taint_rules)
    exp = Explainer().explain(pending("p", req("gpu")), index, w.classes)
    assert exp.requests[0].choices[0].blocked == {"PoolIncomplete": [f"{DRIVER}/pool-a/gpu-0"]}


def test_cel_results_cached_across_claims(setup: Any) -> None:
    ex, index, classes = setup
    ex.explain(pending("x", req("gpu")), index, classes)
    first = ex.cel.evaluations
    # The class selects by driver alone: one evaluation for the driver, not one a device.
    assert 1 <= first < len(index)
    for _ in range(2):
        ex.explain(pending("x", req("gpu")), index, classes)
    assert ex.cel.evaluations == first


def test_structured_output(setup: Any) -> None:
    ex, index, classes = setup
    d = ex.explain(pending("x", req("gpu", count=9)), index, classes).to_dict()
    assert d["claim"] == "default/x" and d["verdict"] == "Unallocatable"
    assert d["requests"][0]["choices"][0]["matchedDevices"] == 5


# -- the verdict from the port of the allocator's search ----------------------------------


def _exact(*objects: Any, claim_: ResourceClaim) -> Any:
    w = world(CLASS, *objects)
    results = compute_world(w)
    index = DeviceIndex.build(results, w.taint_rules)
    return Explainer().explain(claim_, index, w.classes, results=results, rules=w.taint_rules)


def test_search_says_allocatable_where_the_estimate_only_hopes() -> None:
    exp = _exact(
        rslice("node-a", [device("gpu-0", model="A100"), device("gpu-1", model="A100")]),
        claim_=pending("two", req("gpu", count=2)),
    )
    assert exp.verdict == "Allocatable" and "node-a" in exp.summary


def test_search_refuses_a_combination_the_estimate_accepts() -> None:
    # Two free A100s in total, but a matchAttribute constraint on clique that no two of
    # them share: enough devices by count, no solution for the allocator.
    exp = _exact(
        rslice(
            "node-a",
            [device("gpu-0", model="A100", clique="a"), device("gpu-1", model="A100", clique="b")],
        ),
        claim_=pending(
            "pair",
            req("one", "device.attributes['gpu.example.com'].model == 'A100'"),
            req("two", "device.attributes['gpu.example.com'].model == 'A100'"),
            constraints=[{"matchAttribute": "gpu.example.com/clique"}],
        ),
    )
    assert exp.verdict == "Unallocatable"


def test_search_meets_a_cel_error_only_where_the_allocator_walks() -> None:
    # gpu-0 fits first; gpu-1 lacks the attribute the selector reads, but the allocator
    # stops at the first fit and never evaluates it.
    exp = _exact(
        rslice("node-a", [device("gpu-0", model="A100"), device("gpu-1")]),
        claim_=pending("one", req("gpu", "device.attributes['gpu.example.com'].model == 'A100'")),
    )
    assert exp.verdict == "Allocatable"
    exp = _exact(
        rslice("node-a", [device("gpu-0"), device("gpu-1", model="A100")]),
        claim_=pending("one", req("gpu", "device.attributes['gpu.example.com'].model == 'A100'")),
    )
    assert exp.verdict == "Error" and "aborts" in exp.summary


def test_a_share_request_is_rounded_up_to_the_policy_step() -> None:
    # min 1G, step 2G: a request of 1.5G takes 3G, more than the 2G left.
    policy = {"validRange": {"min": "1G", "step": "2G"}}
    nic = device("nic", shareable=True, capacity={"bw": {"value": "10G", "requestPolicy": policy}})
    w = world(
        CLASS, rslice("node-a", [nic]), claim("a", result("nic", share="1", consumed={"bw": "8G"}))
    )
    # 3G, printed as the allocator prints a rounded amount: until 1.36 whole units
    # (BinarySI, not a power of 1024), from 1.37 milli-units in the step's format.
    for profile, text in ((make_profile("1.36"), "3000000000"), (DEFAULT, "3G")):
        index = DeviceIndex.build(compute_world(w, EngineOptions(profile=profile)), w.taint_rules)
        exp = Explainer().explain(
            pending("c", req("gpu", capacity={"requests": {"bw": "1.5G"}})), index, w.classes
        )
        choice = exp.requests[0].choices[0]
        assert "CapacityTooSmall" in choice.blocked
        assert f"takes {text}" in choice.details[f"{DRIVER}/pool-a/nic"]
