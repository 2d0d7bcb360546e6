"""One test per validation-error prefix of DESIGN §4."""

import pytest
from builders import DRIVER, claim, counter_pool, device, result, rslice
from engine_helpers import pool, prefixes, states

from draview.api.world import build_world
from draview.engine.world import compute_world

SETS = {"cs": {"memory": "40Gi"}}


def test_duplicate_device_is_an_allocator_error() -> None:
    r = pool(rslice("a", [device("gpu-0")], count=2), rslice("b", [device("gpu-0")], count=2))
    assert prefixes(r) == ["DuplicateDevice"]
    assert r.errors.allocator and "slices a and b" in r.errors.allocator[0]
    assert {c["type"]: c["status"] for c in r.status["conditions"]}["Valid"] == "False"


def test_duplicate_counter_set() -> None:
    r = pool(
        rslice("a", None, count=3, counter_sets=SETS),
        *counter_pool("b", [device("p", counters={"cs": {"memory": "1Gi"}})], SETS, count=2),
    )
    assert "DuplicateCounterSet" in prefixes(r)
    assert states(r)["p"] == ("Unavailable", "PoolInvalid")


def test_counter_set_not_found() -> None:
    r = pool(*counter_pool("a", [device("p", counters={"nope": {"memory": "1Gi"}})], SETS))
    assert prefixes(r) == ["CounterSetNotFound"]
    assert states(r)["p"] == ("Unavailable", "PoolInvalid")


def test_counter_not_found() -> None:
    r = pool(*counter_pool("a", [device("p", counters={"cs": {"cores": "1"}})], SETS))
    assert prefixes(r) == ["CounterNotFound"]


@pytest.mark.parametrize("where", ["counter", "consumption", "capacity"])
def test_invalid_quantity_is_recorded_not_raised(where: str) -> None:
    bad = "12XB"
    sets = {"cs": {"memory": bad if where == "counter" else "40Gi"}}
    dev = device(
        "p",
        counters={"cs": {"memory": bad if where == "consumption" else "1Gi"}},
        capacity={"memory": bad if where == "capacity" else "1Gi"},
    )
    r = pool(*counter_pool("a", [dev], sets))
    assert "InvalidQuantity" in prefixes(r)
    assert states(r)["p"] == ("Unavailable", "PoolInvalid")


@pytest.mark.parametrize("step", ["0", "-2"])
def test_a_step_that_is_not_positive_is_an_error_not_a_crash(step: str) -> None:
    # No API server holds it (its validation divides by the step); the fuzzer made one.
    policy = {"validRange": {"min": "1G", "step": step}}
    nic = device("nic", shareable=True, capacity={"bw": {"value": "10G", "requestPolicy": policy}})
    r = pool(rslice("s", [nic]), claim("a", result("nic", share="1", consumed={"bw": "2G"})))
    assert prefixes(r) == ["InvalidQuantity"]
    assert "validRange step" in r.errors.allocator[0]
    assert states(r)["nic"] == ("Unavailable", "PoolInvalid")


def test_inconsistent_slice_count_is_reported_but_not_an_allocator_error() -> None:
    r = pool(rslice("a", [device("x")], count=2), rslice("b", [device("y")], count=3))
    assert prefixes(r) == ["InconsistentSliceCount"]
    assert not r.errors.allocator
    # The allocator trusts the count of whichever slice it lists first: complete with 2,
    # incomplete with 3. draview says the answer depends on that order.
    assert states(r)["x"] == ("Unavailable", "InconsistentSliceCount")


def test_dangling_allocation() -> None:
    r = pool(rslice("a", [device("gpu-0")]), claim("c", result("gpu-7")))
    assert prefixes(r) == ["DanglingAllocation"]
    assert "default/c" in r.errors.other[0]
    assert states(r)["gpu-0"] == ("Available", None)


def test_counter_overcommitted() -> None:
    devs = [
        device("a", counters={"cs": {"memory": "30Gi"}}),
        device("b", counters={"cs": {"memory": "30Gi"}}),
    ]
    r = pool(*counter_pool("s", devs, SETS), claim("c", result("a"), result("b")))
    assert prefixes(r) == ["CounterOvercommitted"]
    assert r.status["counterSets"][0]["counters"]["memory"]["available"] == "-20Gi"


def test_capacity_overcommitted() -> None:
    nic = device(
        "nic", shareable=True, capacity={"bw": {"value": "10G", "requestPolicy": {"default": "1G"}}}
    )
    r = pool(
        rslice("s", [nic]),
        claim("a", result("nic", share="1", consumed={"bw": "8G"})),
        claim("b", result("nic", share="2", consumed={"bw": "8G"})),
    )
    assert prefixes(r) == ["CapacityOvercommitted"]
    assert states(r)["nic"] == ("Allocated", None)


def test_mixin_not_found_keeps_the_device() -> None:
    s = rslice(
        "s",
        [
            {
                "name": "gpu-0",
                "includes": ["common", "missing"],
                "attributes": {"model": {"string": "B200"}},
            }
        ],
        mixins={
            "device": [
                {
                    "name": "common",
                    "attributes": {"model": {"string": "A100"}, "vendor": {"string": "acme"}},
                }
            ]
        },
    )
    r = pool(s)
    assert prefixes(r) == ["MixinNotFound"]
    assert states(r)["gpu-0"] == ("Available", None)


def test_malformed_slice_is_a_problem_of_its_pool_and_others_still_served() -> None:
    bad = rslice("bad", [device("x")], count=2)
    bad["spec"]["devices"] = [{"name": "x", "taints": "not-a-list"}]
    objs = [
        bad,
        rslice("good", [device("y")], count=2),
        rslice("other", [device("z")], pool="pool-b"),
    ]
    w = build_world(objs)
    assert [p.name for p in w.problems] == ["bad"]
    res = {r.key: r for r in compute_world(w)}
    assert any(
        e.startswith("InvalidObject: ResourceSlice bad")
        for e in res[(DRIVER, "pool-a")].errors.all()
    )
    assert states(res[(DRIVER, "pool-b")])["z"] == ("Available", None)
