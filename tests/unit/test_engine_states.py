"""One test per row of DESIGN §4's device-state table, in the table's order."""

import json

from builders import claim, counter_pool, device, result, rslice, taint_rule, world
from engine_helpers import pool, prefixes, states

from draview.engine.allocations import claim_allocations
from draview.engine.pool import compute_pool
from draview.engine.world import compute_world


def test_unallocated_device_is_available() -> None:
    r = pool(rslice("s", [device("gpu-0"), device("gpu-1")]))
    assert states(r) == {"gpu-0": ("Available", None), "gpu-1": ("Available", None)}


def test_allocated_device() -> None:
    r = pool(rslice("s", [device("gpu-0"), device("gpu-1")]), claim("c", result("gpu-0")))
    assert states(r)["gpu-0"] == ("Allocated", None)
    dev = r.slices[0].status["devices"][0]
    assert dev["allocations"] == [
        {
            "claimNamespace": "default",
            "claimName": "c",
            "claimUID": "uid-default-c",
            "request": "gpu",
        }
    ]


def test_admin_access_never_makes_a_device_used() -> None:
    r = pool(rslice("s", [device("gpu-0")]), claim("admin", result("gpu-0", admin=True)))
    assert states(r)["gpu-0"] == ("Available", None)
    dev = r.slices[0].status["devices"][0]
    assert dev["allocations"][0]["adminAccess"] is True
    assert r.status["summary"]["allocatedDevices"] == 0


def test_shareable_with_capacity_left_is_partially_allocated() -> None:
    nic = device(
        "nic-0",
        shareable=True,
        capacity={
            "bandwidth": {
                "value": "100G",
                "requestPolicy": {"default": "10G", "validRange": {"min": "1G"}},
            }
        },
    )
    r = pool(
        rslice("s", [nic]),
        claim("a", result("nic-0", share="s1", consumed={"bandwidth": "40G"})),
        claim("b", result("nic-0", share="s2", consumed={"bandwidth": "30G"})),
    )
    assert states(r)["nic-0"] == ("PartiallyAllocated", None)
    dev = r.slices[0].status["devices"][0]
    assert dev["capacity"] == {"bandwidth": "100G"}
    assert dev["availableCapacity"] == {"bandwidth": "30G"}
    s = r.status["summary"]
    assert (s["allocatedDevices"], s["partiallyAllocatedDevices"]) == (1, 1)
    assert s["totalCapacity"] == {"bandwidth": "100G"}
    assert s["allocatedCapacity"] == {"bandwidth": "70G"}
    assert s["availableCapacity"] == {"bandwidth": "30G"}


def test_shareable_with_capacity_exhausted_is_allocated() -> None:
    nic = device(
        "nic-0",
        shareable=True,
        capacity={"bandwidth": {"value": "100G", "requestPolicy": {"validRange": {"min": "20G"}}}},
    )
    r = pool(
        rslice("s", [nic]), claim("a", result("nic-0", share="s1", consumed={"bandwidth": "90G"}))
    )
    # 10G left but every allocation takes at least 20G: nothing more fits.
    assert states(r)["nic-0"] == ("Allocated", None)


def test_shareable_without_request_policy_fits_a_one_unit_request() -> None:
    # The allocator takes what a request asks (calculateConsumedCapacity); only a request
    # that asks for nothing takes the whole capacity. One more unit fits in 90G.
    nic = device("nic-0", shareable=True, capacity={"bandwidth": "100G"})
    r = pool(
        rslice("s", [nic]), claim("a", result("nic-0", share="s1", consumed={"bandwidth": "10G"}))
    )
    assert states(r)["nic-0"] == ("PartiallyAllocated", None)


def test_shareable_without_request_policy_full_is_allocated() -> None:
    nic = device("nic-0", shareable=True, capacity={"bandwidth": "100G"})
    r = pool(
        rslice("s", [nic]), claim("a", result("nic-0", share="s1", consumed={"bandwidth": "100G"}))
    )
    assert states(r)["nic-0"] == ("Allocated", None)


def test_invalid_pool_makes_free_devices_unavailable_but_not_allocated_ones() -> None:
    r = pool(
        rslice("s1", [device("gpu-0"), device("gpu-1")], count=2),
        rslice("s2", [device("gpu-0"), device("gpu-2")], count=2),
        claim("c", result("gpu-1")),
    )
    st = states(r)
    assert st["gpu-1"] == ("Allocated", None)
    assert st["gpu-2"] == ("Unavailable", "PoolInvalid")
    assert "DuplicateDevice" in prefixes(r)


def test_incomplete_pool() -> None:
    r = pool(rslice("s1", [device("gpu-0")], count=2))
    assert states(r)["gpu-0"] == ("Unavailable", "PoolIncomplete")
    cond = {c["type"]: c for c in r.status["conditions"]}
    assert cond["Complete"]["status"] == "False"
    assert cond["Valid"]["status"] == "True"
    assert (r.status["observedSliceCount"], r.status["expectedSliceCount"]) == (1, 2)


def test_stale_generation_devices_are_unavailable_and_not_in_pool_summary() -> None:
    r = pool(
        rslice("old", [device("gpu-0"), device("gpu-9")], generation=1),
        rslice("new", [device("gpu-0")], generation=2),
    )
    assert states(r, "old") == {
        "gpu-0": ("Unavailable", "StaleGeneration"),
        "gpu-9": ("Unavailable", "StaleGeneration"),
    }
    assert states(r, "new") == {"gpu-0": ("Available", None)}
    assert r.status["summary"]["totalDevices"] == 1
    old = next(sr for sr in r.slices if sr.slice.name == "old")
    assert old.status["summary"]["unavailableDevices"] == 2
    assert r.status["generation"] == 2 and r.status["slices"] == ["new"]


def test_device_taints_block_unless_effect_none() -> None:
    r = pool(
        rslice(
            "s",
            [
                device("a", taints=[{"key": "k", "effect": "NoSchedule"}]),
                device("b", taints=[{"key": "k", "effect": "NoExecute"}]),
                device("c", taints=[{"key": "k", "effect": "None"}]),
            ],
        )
    )
    assert states(r) == {
        "a": ("Unavailable", "Tainted"),
        "b": ("Unavailable", "Tainted"),
        "c": ("Available", None),
    }


def test_device_taint_rule_by_selector_and_empty_selector() -> None:
    s = rslice("s", [device("gpu-0"), device("gpu-1")])
    assert states(pool(s, taint_rule("r", device="gpu-1")))["gpu-1"] == ("Unavailable", "Tainted")
    assert states(pool(s, taint_rule("r", device="gpu-1")))["gpu-0"] == ("Available", None)
    assert states(pool(s, taint_rule("r", pool="other")))["gpu-1"] == ("Available", None)
    everything = states(pool(s, taint_rule("all")))
    assert set(everything.values()) == {("Unavailable", "Tainted")}
    assert states(pool(s, taint_rule("n", effect="None")))["gpu-0"] == ("Available", None)


def test_insufficient_shared_counters() -> None:
    sets = {"gpu-0-counters": {"memory": "40Gi"}}
    devs = [
        device("whole", counters={"gpu-0-counters": {"memory": "40Gi"}}),
        device("half-a", counters={"gpu-0-counters": {"memory": "20Gi"}}),
        device("half-b", counters={"gpu-0-counters": {"memory": "20Gi"}}),
    ]
    r = pool(
        rslice("counters", None, count=2, counter_sets=sets),
        rslice("devices", devs, count=2),
        claim("c", result("half-a")),
    )
    assert states(r) == {
        "whole": ("Unavailable", "InsufficientSharedCapacity"),
        "half-a": ("Allocated", None),
        "half-b": ("Available", None),
    }
    usage = r.status["counterSets"][0]["counters"]["memory"]
    assert usage == {"total": "40Gi", "consumed": "20Gi", "available": "20Gi"}


def test_counters_are_debited_once_per_device_not_per_claim() -> None:
    sets = {"cs": {"memory": "40Gi"}}
    devs = [device("p", counters={"cs": {"memory": "10Gi"}})]
    r = pool(
        *counter_pool("s", devs, sets),
        claim("a", result("p")),
        claim("b", result("p", request="other")),
    )
    assert r.status["counterSets"][0]["counters"]["memory"]["consumed"] == "10Gi"


def test_composite_source_and_sinks() -> None:
    def comp(name: str, mem: str, source: str | None = None) -> dict:
        body: dict = {"capacity": {"memory": {"quantity": mem}}}
        if source:
            body["consumesCapacityFrom"] = [{"name": source}]
        return {"name": name, "composite": body}

    devs = [
        comp("gpu", "40Gi"),
        comp("p0", "20Gi", "gpu"),
        comp("p1", "20Gi", "gpu"),
        comp("p2", "30Gi", "gpu"),
    ]
    r = pool(rslice("s", devs), claim("c", result("p0")))
    assert states(r) == {
        "gpu": ("Unavailable", "CapacitySourceInUse"),
        "p0": ("Allocated", None),
        "p1": ("Available", None),
        "p2": ("Unavailable", "CapacitySourceInUse"),
    }
    r2 = pool(rslice("s", devs), claim("c", result("gpu")))
    assert states(r2)["p1"] == ("Unavailable", "CapacitySourceInUse")


def test_rule_order_incomplete_beats_taint() -> None:
    r = pool(rslice("s", [device("a", taints=[{"key": "k", "effect": "NoSchedule"}])], count=3))
    assert states(r)["a"] == ("Unavailable", "PoolIncomplete")


def test_prepared_pool_is_reused_only_for_the_same_slices() -> None:
    from draview.api.slices import ResourceSlice
    from draview.engine.model import AllocRef
    from draview.engine.pool import compute_pool
    from draview.engine.rules import Rules

    s = ResourceSlice.from_object(rslice("s", [device("gpu-0"), device("gpu-1")]))
    key = s.pool_key
    first = compute_pool(key, [s])
    assert first.prepared is not None and first.prepared.serves([s], None, first.prepared.rules)
    ref = AllocRef("gpu-0", "default", "c", "uid-c", "gpu")
    again = compute_pool(key, [s], [ref], prepared=first.prepared)
    assert again.prepared is first.prepared
    assert again.status == compute_pool(key, [s], [ref]).status
    changed = ResourceSlice.from_object(rslice("s", [device("gpu-0")]))
    assert not first.prepared.serves([changed], None, first.prepared.rules)
    assert not first.prepared.serves([s], None, Rules(taints=False))
    third = compute_pool(key, [changed], [ref], prepared=first.prepared)
    assert third.prepared is not first.prepared
    assert third.status["summary"]["totalDevices"] == 1


def test_an_idle_counter_row_is_shared_yet_each_body_keeps_its_own_figures() -> None:
    # Idle rows are rendered once per counter set and shared by every computation of a
    # prepared pool (validate.SetRow), as the operator recomputes after a claim change:
    # a computation that consumes the counter must leave earlier bodies as they were.
    sets = {"cs": {"memory": "40Gi", "copies": "2"}}
    w = world(*counter_pool("s", [device("half", counters={"cs": {"memory": "20Gi"}})], sets))
    (idle,) = compute_world(w)
    before = json.dumps(idle.status, sort_keys=True)
    slices = list(w.slices)
    refs = claim_allocations(world(claim("c", result("half"))).claims[0])[idle.key]
    used = compute_pool(idle.key, slices, refs, prepared=idle.prepared)
    again = compute_pool(idle.key, slices, (), prepared=idle.prepared)
    assert used.status["counterSets"][0]["counters"]["memory"]["consumed"] == "20Gi"
    assert used.status["counterSets"][0]["counters"]["copies"]["consumed"] == "0"
    assert json.dumps(idle.status, sort_keys=True) == before
    assert json.dumps(again.status, sort_keys=True) == before
