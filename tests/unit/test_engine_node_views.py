"""The allocator's rules that the pool-wide reading got wrong, one test each (the
classes of disagreement found when pools were first judged per node, and what the
differential tests found since)."""

from typing import Any

from builders import claim, counter_pool, device, result, rslice
from engine_helpers import pool, states

from draview.engine.profile import all_gates_on, make_profile

SETS = {"cs": {"memory": "40Gi"}}
NODE = {"apiVersion": "v1", "kind": "Node"}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {**NODE, "metadata": {"name": name, "labels": labels}}


def counters_slice(**kw: Any) -> dict[str, Any]:
    return rslice("counters", counter_sets=SETS, count=2, **kw)


def test_an_overdrawn_counter_blocks_every_counter_consuming_device() -> None:
    # a and b both allocated overdraw memory; c consumes nothing of it in another set,
    # yet checkAvailableCounters compares every counter of the pool.
    sets = {"cs": {"memory": "40Gi"}, "other": {"memory": "40Gi"}}
    r = pool(
        *counter_pool(
            "s",
            [
                device("a", counters={"cs": {"memory": "30Gi"}}),
                device("b", counters={"cs": {"memory": "30Gi"}}),
                device("c", counters={"other": {"memory": "1Gi"}}),
                device("d"),
            ],
            sets,
        ),
        claim("x", result("a"), result("b")),
    )
    st = states(r)
    assert st["c"] == ("Unavailable", "CounterOvercommitted")
    assert st["d"] == ("Available", None)


def test_a_shared_device_in_use_but_tainted_is_unavailable_not_partially_allocated() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    nic = device("nic", shareable=True, capacity={"bw": "100G"}, taints=[taint])
    r = pool(rslice("s", [nic]), claim("x", result("nic", share="s1", consumed={"bw": "10G"})))
    assert states(r)["nic"] == ("Unavailable", "Tainted")
    assert r.slices[0].status["devices"][0]["allocationCount"] == 1


def test_duplicate_names_on_different_nodes_invalidate_neither() -> None:
    r = pool(
        rslice("a", [device("gpu-0")], node="node-a", count=2),
        rslice("b", [device("gpu-0")], node="node-b", count=2),
    )
    assert [d["state"] for sr in r.slices for d in sr.status["devices"]] == ["Available"] * 2
    assert not r.errors.allocator


def test_a_stale_slice_stays_usable_where_the_newer_generation_does_not_reach() -> None:
    r = pool(
        rslice("new", [device("gpu-1")], node="node-b", generation=2),
        rslice("old", [device("gpu-0")], node="node-a", generation=1),
    )
    assert states(r, "old")["gpu-0"] == ("Available", None)


def test_a_share_without_consumed_capacity_debits_the_counters_again_until_1_37() -> None:
    # The scheduler writes no consumedCapacity for a device without capacity; the 1.36
    # allocator then checks its counters again for the next share: 30 + 30 > 40. 1.37
    # counts any share as the counters already debited.
    nic = device("nic", shareable=True, counters={"cs": {"memory": "30Gi"}})
    world = (*counter_pool("s", [nic], SETS), claim("x", result("nic", share="s1")))
    r = pool(*world, profile=all_gates_on("1.36"))
    assert states(r)["nic"] == ("Unavailable", "CountersChargedPerShare")
    assert states(pool(*world, profile=make_profile("1.37")))["nic"] == ("PartiallyAllocated", None)
    roomy = device("nic", shareable=True, counters={"cs": {"memory": "10Gi"}})
    r = pool(*counter_pool("s", [roomy], SETS), claim("x", result("nic", share="s1")))
    assert states(r)["nic"] == ("PartiallyAllocated", None)


def test_a_result_without_share_id_makes_a_shareable_device_exclusive() -> None:
    nic = device("nic", shareable=True, capacity={"bw": "100G"})
    r = pool(rslice("s", [nic]), claim("x", result("nic")))
    assert states(r)["nic"] == ("Allocated", None)


def test_a_share_id_on_a_device_that_is_not_shareable_does_not_block_it() -> None:
    r = pool(rslice("s", [device("gpu-0")]), claim("x", result("gpu-0", share="s1")))
    assert states(r)["gpu-0"] == ("PartiallyAllocated", None)


def test_a_device_selector_with_several_terms_cannot_be_written_into_a_result() -> None:
    two_terms = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
        ]
    }
    dev = {**device("gpu-0"), "nodeSelector": two_terms}
    r = pool(
        rslice(
            "s",
            [dev, {**device("gpu-1"), "allNodes": True}],
            node=None,
            perDeviceNodeSelection=True,
        ),
        node("node-a", a="1"),
    )
    assert states(r)["gpu-0"] == ("Unavailable", "UnsupportedNodeSelector")
    assert states(r)["gpu-1"] == ("Available", None)


def test_a_selector_no_known_node_matches_is_unreachable_and_assumed_without_nodes() -> None:
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "fabric", "operator": "Exists"}]}]}
    s = rslice("s", [device("gpu-0")], node=None, nodeSelector=sel)
    assert states(pool(s, node("node-a")))["gpu-0"] == ("Unavailable", "Unreachable")
    assert states(pool(s, node("node-a", fabric="x")))["gpu-0"] == ("Available", None)
    assert states(pool(s))["gpu-0"] == ("Available", None)  # nodes unknown


def test_counter_slices_count_for_every_node_and_debits_come_from_the_whole_pool() -> None:
    # node-b's view looks incomplete (counter slice + its own slice, count 3), so the
    # allocator takes the pool's other slice into account: a's allocation debits memory.
    r = pool(
        rslice("counters", counter_sets=SETS, count=3, node=None),
        rslice("a", [device("a", counters={"cs": {"memory": "30Gi"}})], node="node-a", count=3),
        rslice("b", [device("b", counters={"cs": {"memory": "20Gi"}})], node="node-b", count=3),
        claim("x", result("a")),
    )
    assert states(r, "b")["b"] == ("Unavailable", "InsufficientSharedCapacity")


def _partition(r: Any, kind: str) -> dict[str, Any]:
    return next(p for p in r.status["partitions"] if p["type"] == kind)


def test_partition_counts_a_device_held_by_a_share_id_it_can_still_give() -> None:
    devs = [device("a", profile="small"), device("b", profile="small")]
    r = pool(
        rslice("s", devs),
        claim("x", result("a", share="s1")),
        partition_attributes=("gpu.example.com/profile",),
    )
    assert _partition(r, "small")["allocatable"] == 2


def test_partition_counts_one_node_at_a_time() -> None:
    r = pool(
        rslice("a", [device("a", profile="small")], node="node-a", count=2),
        rslice("b", [device("b", profile="small")], node="node-b", count=2),
        partition_attributes=("gpu.example.com/profile",),
    )
    assert _partition(r, "small")["allocatable"] == 1  # one claim is served on one node


def test_partition_with_a_several_term_selector_is_first_fit() -> None:
    two_terms = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
        ]
    }
    devs = [
        {**device("a", profile="small"), "nodeSelector": two_terms},
        {**device("b", profile="small"), "allNodes": True},
    ]
    r = pool(
        rslice("s", devs, node=None, perDeviceNodeSelection=True),
        node("node-a", a="1"),
        partition_attributes=("gpu.example.com/profile",),
    )
    assert _partition(r, "small")["method"] == "firstFit"


def test_views_of_one_pool_trust_counts_order_by_order() -> None:
    from draview.engine.node_views import first_choices

    # Two nodes that gather the same two slices always meet the same one first.
    same = ((0, 0), (1, 1))
    assert sorted(first_choices([same, same])) == [(0, 0), (1, 1)]
    # Nodes gathering different subsets can meet different firsts in one list order:
    # slice 0 (count index 0) vs slice 1 (index 1) for one, slice 1 vs 2 for the other.
    assert sorted(first_choices([((0, 0), (1, 1)), ((1, 1), (2, 0))])) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
