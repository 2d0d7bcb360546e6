"""The rules Kubernetes 1.34's allocator (experimental, with its defaults and with every
DRA gate) keeps apart from 1.35's, each on the smallest world that shows it; read in
k8s.io/dynamic-resource-allocation v0.34.13 and checked against it by
tests/fidelity/test_profiles.py."""

from __future__ import annotations

from typing import Any

from builders import DRIVER, claim, counter_pool, device, result, rslice
from engine_helpers import pool, results, states

from draview.engine.aborts import ABORTS, CONDITION, MAY_ABORT
from draview.engine.profile import all_gates_on, make_profile
from draview.engine.rules import rules_for

K134, K134_ALL = make_profile("1.34"), all_gates_on("1.34")
K135, K135_ALL = make_profile("1.35"), all_gates_on("1.35")


def test_the_rules_apart() -> None:
    rules = rules_for(K134_ALL)
    assert not (rules.check_slices_in_pool or rules.incomplete_pools_refused)
    assert not (rules.counters_per_pool or rules.shares_skip_counter_check)
    assert not (rules.counter_slices_everywhere or rules.capacity_recheck_own_device)
    # The recheck only happens where consumable capacity is on.
    assert rules_for(K134).capacity_recheck_own_device
    # An invalid pool anywhere aborts 1.34's attempt (engine/aborts.py), pools come in
    # map order (explain/orders.py): mirrored with its defaults and with every gate.
    assert not rules.invalid_pool_is_node_local and not rules.pools_sorted
    assert K134.mirrored and K134_ALL.mirrored and K134.caveat() is None


def test_an_incomplete_pool_still_hands_out_devices() -> None:
    s = rslice("s", [device("gpu-0")], count=2)
    assert states(pool(s, profile=K135))["gpu-0"] == ("Unavailable", "PoolIncomplete")
    assert states(pool(s, profile=K134))["gpu-0"] == ("Available", None)


def test_without_partitionable_devices_only_counter_consumers_are_refused() -> None:
    # 1.35 skips a slice with sharedCounters whole; 1.34 keeps it and refuses only the
    # devices that consume counters.
    s = rslice(
        "s",
        [device("whole"), device("half", counters={"set": {"memory": "4Gi"}})],
        counter_sets={"set": {"memory": "8Gi"}},
    )
    assert states(pool(s, profile=K135))["whole"] == ("Unavailable", "PartitionableDevicesDisabled")
    assert states(pool(s, profile=K134)) == {
        "whole": ("Available", None),
        "half": ("Unavailable", "PartitionableDevicesDisabled"),
    }


def _slice(name: str, *devices: dict[str, Any], count: int = 1, **counters: str) -> dict[str, Any]:
    return rslice(name, list(devices), count=count, counter_sets={"set": counters})


def test_counter_sets_are_each_slices_own() -> None:
    eng = {"set": {"engines": "1"}}
    objs = (
        # Two allocated devices overdraw slice a's engines: every counter consumer of
        # slice a is refused, the equally named set of slice b is untouched.
        _slice(
            "a",
            device("a0", counters=eng),
            device("a1", counters=eng),
            device("a2", counters={"set": {"memory": "1Gi"}}),
            count=2,
            engines="1",
            memory="8Gi",
        ),
        _slice("b", device("b0", counters=eng), count=2, engines="1", memory="8Gi"),
        claim("c", result("a0"), result("a1")),
    )
    got = states(pool(*objs, profile=K134_ALL))
    assert got["a2"] == ("Unavailable", "InsufficientSharedCapacity")
    assert got["b0"] == ("Available", None)
    r = pool(*objs, profile=K134_ALL)
    names = [cs["name"] for cs in r.status["counterSets"]]
    assert names == ["a/set", "b/set"]  # the pool's sets, one per slice


def test_every_share_checks_the_counters() -> None:
    # 1.35 lets a share of a device whose shares hold capacity skip the counter check;
    # 1.34 checks (shares debit nothing, the dedicated d1 took the memory).
    devices = [
        device(
            "n0",
            shareable=True,
            capacity={"bandwidth": "10G"},
            counters={"set": {"memory": "8Gi"}},
        ),
        device("d1", counters={"set": {"memory": "8Gi"}}),
    ]
    shares = claim("c", result("n0", share="7d2e", consumed={"bandwidth": "1G"}), result("d1"))
    # Each release's layout: 1.35 keeps counter sets in a slice of their own.
    apart = counter_pool("a", devices, {"set": {"memory": "8Gi"}})
    assert states(pool(*apart, shares, profile=K135_ALL))["n0"] == ("PartiallyAllocated", None)
    assert (
        states(pool(_slice("a", *devices, memory="8Gi"), shares, profile=K134_ALL))["n0"][0]
        == "Unavailable"
    )


def test_capacity_is_checked_again_on_the_slices_first_device() -> None:
    # The probe asks n1 for one unit of bandwidth; 1.34 checks that request again
    # against n0, which has no bandwidth, and gives up.
    s = rslice(
        "s",
        [
            device("n0", capacity={"cores": "8"}),
            device("n1", shareable=True, capacity={"bandwidth": "100G"}),
        ],
    )
    assert states(pool(s, profile=K135_ALL))["n1"] == ("Available", None)
    assert states(pool(s, profile=K134_ALL))["n1"] == ("Unavailable", "InsufficientCapacity")


def test_a_count_beyond_a_slices_length_is_first_fit() -> None:
    # Three "small" devices, one of them alone in its slice: 1.34 takes the third device
    # of a request only from a slice with a third device.
    objs = (
        rslice("a", [device("g1", profile="small"), device("g2", profile="small")], count=2),
        rslice("b", [device("g3", profile="small")], count=2),
    )
    attrs = ("gpu.example.com/profile",)
    for profile, method in ((K135_ALL, "exact"), (K134_ALL, "firstFit")):
        (part,) = pool(*objs, profile=profile, partition_attributes=attrs).status["partitions"]
        assert (part["allocatable"], part["method"]) == (3, method)


def _aborting_world() -> tuple[dict[str, Any], ...]:
    # node-a gathers pool "bad", whose two slices both name gpu-0: invalid. 1.34's walk
    # on node-a aborts the attempt when it meets "bad", in map order.
    return (
        rslice("bad-1", [device("gpu-0", profile="small")], pool="bad", count=2),
        rslice("bad-2", [device("gpu-0", profile="small")], pool="bad", count=2),
        rslice("good", [device("gpu-1", profile="small")], pool="good"),
        rslice("other", [device("gpu-2", profile="small")], pool="other", node="node-b"),
    )


def test_an_invalid_pool_aborts_attempts_on_every_node() -> None:
    got = results(*_aborting_world(), profile=K134)
    # node-a can take gpu-1 when it meets "good" before "bad": some attempts allocate it.
    assert states(got[(DRIVER, "good")])["gpu-1"] == ("Unavailable", MAY_ABORT)
    # node-a cannot take gpu-2 at all: its walk meets "bad" in every attempt.
    assert states(got[(DRIVER, "other")])["gpu-2"] == ("Unavailable", ABORTS)
    assert states(got[(DRIVER, "bad")], "bad-1")["gpu-0"] == ("Unavailable", "PoolInvalid")
    (cond,) = [c for c in got[(DRIVER, "other")].status["conditions"] if c["type"] == CONDITION]
    assert cond["status"] == "True" and "gpu.example.com/bad" in cond["message"]
    # From 1.35 the error stays on node-a.
    later = results(*_aborting_world(), profile=K135)
    assert states(later[(DRIVER, "good")])["gpu-1"] == ("Available", None)
    assert states(later[(DRIVER, "other")])["gpu-2"] == ("Available", None)
    assert all(c["type"] != CONDITION for c in later[(DRIVER, "other")].status["conditions"])


def test_partitions_behind_an_invalid_pool() -> None:
    attrs = ("gpu.example.com/profile",)
    got = results(*_aborting_world(), profile=K134, partition_attributes=attrs)
    (good,) = got[(DRIVER, "good")].status["partitions"]
    (other,) = got[(DRIVER, "other")].status["partitions"]
    # One fits on node-a in the attempts that meet "good" first; none ever on node-b.
    assert (good["allocatable"], good["available"], good["method"]) == (1, 0, "firstFit")
    assert (other["allocatable"], other["available"], other["method"]) == (0, 0, "exact")


def _bound(name: str) -> dict[str, Any]:
    d = device(name)
    d["bindingConditions"] = ["example.com/attached"]
    return d


def test_pools_with_binding_conditions_come_last_in_the_walk() -> None:
    # 1.34's GatherPools puts pools holding devices with binding conditions after the
    # others: an invalid pool without them always comes before such a pool, and an
    # invalid pool with them always after a pool without.
    bad = (rslice("bad-1", [device("gpu-0")], pool="bad", count=2),)
    objs = (
        *bad,
        rslice("bad-2", [device("gpu-0")], pool="bad", count=2),
        rslice("bind", [_bound("gpu-1")], pool="bind"),
        rslice("plain", [device("gpu-2")], pool="plain"),
    )
    got = results(*objs, profile=K134_ALL)
    assert states(got[(DRIVER, "bind")])["gpu-1"] == ("Unavailable", ABORTS)
    assert states(got[(DRIVER, "plain")])["gpu-2"] == ("Unavailable", MAY_ABORT)
    late = (
        *bad,
        rslice("bad-2", [_bound("gpu-0")], pool="bad", count=2),
        rslice("plain", [device("gpu-2")], pool="plain"),
    )
    got = results(*late, profile=K134_ALL)
    assert states(got[(DRIVER, "plain")])["gpu-2"] == ("Available", None)
