"""The rules Kubernetes 1.35's experimental allocator (every DRA gate on) keeps apart
from 1.36's, each on the smallest world the fidelity harness found it in (against
k8s.io/dynamic-resource-allocation v0.35.10 and v0.36.6)."""

from __future__ import annotations

from typing import Any

from builders import claim, device, device_class, result, rslice, world
from engine_helpers import pool, states

from draview.api.claims import ResourceClaim
from draview.engine.model import EngineOptions
from draview.engine.profile import all_gates_on
from draview.engine.rules import rules_for
from draview.engine.world import compute_world
from draview.explain.allocatable import allocatable

K135, K136 = all_gates_on("1.35"), all_gates_on("1.36")
SET = "gpu-0-set"
CLASS = device_class()


def _counters(count: int, **counters: str) -> dict[str, Any]:
    return rslice("counters", [], count=count, counter_sets={SET: counters})


def test_the_rules_apart() -> None:
    # Checked against v0.35.10 by tests/fidelity/test_profiles.py ("1.35-all-gates").
    assert K135.implementation == "experimental" and K135.mirrored and K135.caveat() is None
    rules = rules_for(K135)
    assert not rules.node_slices_first
    assert not rules.shares_debit_counters
    assert not rules.refusals_release_counters
    new = rules_for(K136)
    assert new.node_slices_first and new.shares_debit_counters and new.refusals_release_counters


def test_any_slice_of_the_view_may_decide_completeness() -> None:
    # 1.36 hands GatherPools the node's own device slices before the counter slices, so
    # the device slice's count (3) always decides; 1.35 takes whichever is listed first.
    objs = (
        _counters(2, memory="8Gi"),
        rslice("devices", [device("mig-0", counters={SET: {"memory": "4Gi"}})], count=3),
    )
    assert states(pool(*objs, profile=K136), "devices")["mig-0"] == (
        "Unavailable",
        "PoolIncomplete",
    )
    assert states(pool(*objs, profile=K135), "devices")["mig-0"] == (
        "Unavailable",
        "InconsistentSliceCount",
    )


def test_shares_leave_the_counters_alone() -> None:
    # A result with a shareID on a device that is not shareable: 1.36 charges its
    # counters (IsDeviceAllocated), 1.35 only charges results without shareID.
    objs = (
        _counters(2, memory="8Gi"),
        rslice(
            "devices",
            [
                device("mig-0", counters={SET: {"memory": "8Gi"}}),
                device("mig-1", counters={SET: {"memory": "8Gi"}}),
            ],
            count=2,
        ),
        claim("odd", result("mig-0", share="5b4c2d1e")),
    )
    assert states(pool(*objs, profile=K136), "devices")["mig-1"] == (
        "Unavailable",
        "InsufficientSharedCapacity",
    )
    assert states(pool(*objs, profile=K135), "devices")["mig-1"] == ("Available", None)


TAINT = [{"key": "example.com/unhealthy", "effect": "NoSchedule"}]
ME = {SET: {"jpeg": "1"}}


def _tainted_first() -> tuple[dict[str, Any], ...]:
    # Three placements share one jpeg engine; the first one the search meets is tainted.
    return (
        _counters(2, jpeg="1"),
        rslice(
            "devices",
            [
                device("me-0", counters=ME, taints=TAINT, profile="1g+me"),
                device("me-1", counters=ME, profile="1g+me"),
                device("me-2", counters=ME, profile="1g+me"),
            ],
            count=2,
        ),
    )


def test_a_tainted_device_keeps_the_counters_it_reserved() -> None:
    w = world(CLASS, *_tainted_first())
    pending = ResourceClaim.from_object(claim("one"))
    for profile, answer in ((K136, "yes"), (K135, "no")):
        results = compute_world(w, EngineOptions(profile=profile))
        classes = {c.name: c for c in w.classes}
        got = allocatable(pending, results, classes, profile=profile)
        assert got.answer == answer, (profile.release, got)


def test_partition_counts_behind_a_tainted_device_are_first_fit() -> None:
    attrs = ("gpu.example.com/profile",)
    for profile, method in ((K136, "exact"), (K135, "firstFit")):
        r = pool(*_tainted_first(), profile=profile, partition_attributes=attrs)
        (part,) = r.status["partitions"]
        assert (part["type"], part["allocatable"], part["method"]) == ("1g+me", 1, method)
