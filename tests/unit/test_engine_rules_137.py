"""Rules that hang on 1.37's gates and on binding conditions, each on a small world whose
answers tests/fidelity checks against the allocator of each release (v0.35.10, v0.36.6,
v0.37.2): fractional capacity ranges, binding conditions, compatibility groups."""

from __future__ import annotations

from typing import Any

import pytest
from builders import claim, device, device_class, result, rslice, world
from engine_helpers import pool, states

from draview.api.claims import ResourceClaim
from draview.cel import CelEngine
from draview.engine.capacity import CapacityError, consumed, violates_policy
from draview.engine.model import EngineOptions
from draview.engine.profile import all_gates_on, make_profile
from draview.engine.world import compute_world
from draview.explain.allocatable import allocatable
from draview.quantity import parse_quantity

K135, K136, K137 = make_profile("1.35"), make_profile("1.36"), make_profile("1.37")
K137_ALL = all_gates_on("1.37")
SET = "gpu-0-set"
CLASS = device_class()


def _cores(**policy: str) -> dict[str, Any]:
    return {"value": "2", "requestPolicy": {"default": "500m", "validRange": policy}}


def _shared_cpu(*results: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    dev = device("cpu-0", shareable=True, capacity={"cores": _cores(min="250m", step="250m")})
    return (rslice("cpus", [dev]), *(claim(f"c{i}", r) for i, r in enumerate(results)))


def test_fractional_ranges_round_in_milli_units_from_137() -> None:
    # 1750m of 2 cores are taken: 1.37 asks the range's minimum, 250m, which fits; until
    # 1.36 (and without the gate) the request is rounded to whole cores, 1, which does not.
    objs = _shared_cpu(result("cpu-0", share="a1", consumed={"cores": "1750m"}))
    assert states(pool(*objs, profile=K137))["cpu-0"] == ("PartiallyAllocated", None)
    without = make_profile("1.37", {"DRAFractionalCapacityRange": False})
    assert states(pool(*objs, profile=without))["cpu-0"] == ("Allocated", None)
    assert states(pool(*objs, profile=K136))["cpu-0"] == ("Allocated", None)


def test_milli_arithmetic_of_a_range() -> None:
    cap = rslice_capacity(min="250m", step="250m", max="1500m")
    q = parse_quantity
    assert consumed(q("300m"), cap, fractional=True) == q("500m")
    assert consumed(q("300m"), cap, fractional=False) == q("1")  # ceil(0.3) rounded from 1
    assert not violates_policy(q("750m"), cap, fractional=True)
    assert violates_policy(q("1750m"), cap, fractional=True)  # above max
    # A request finer than a milli-unit cannot be worked in milli-units: the allocator
    # aborts the whole allocation rather than skipping the device.
    with pytest.raises(CapacityError):
        consumed(q("300001u"), cap, fractional=True)
    # Below the minimum it is the minimum, whatever its precision.
    assert consumed(q("1u"), cap, fractional=True) == q("250m")


def rslice_capacity(**policy: str) -> Any:
    obj = rslice("s", [device("d", shareable=True, capacity={"c": _cores(**policy)})])
    return world(obj).slices[0].devices[0].capacity["c"]


def test_binding_conditions_need_their_gates() -> None:
    dev = device("gpu-0")
    dev["bindingConditions"] = ["example.com/attached"]
    objs = (rslice("gpus", [dev, device("gpu-1")]),)
    assert states(pool(*objs, profile=K135))["gpu-0"] == (
        "Unavailable",
        "BindingConditionsDisabled",
    )
    assert states(pool(*objs, profile=K135))["gpu-1"] == ("Available", None)
    assert states(pool(*objs, profile=K136))["gpu-0"] == ("Available", None)
    off = make_profile("1.36", {"DRAResourceClaimDeviceStatus": False})
    assert states(pool(*objs, profile=off))["gpu-0"] == ("Unavailable", "BindingConditionsDisabled")


def _grouped(*groups: tuple[str, ...]) -> list[dict[str, Any]]:
    devs = []
    for i, names in enumerate(groups):
        d = device(f"mig-{i}", counters={SET: {"memory": "1Gi"}})
        if names:
            d["consumesCounters"][0]["compatibilityGroups"] = list(names)
        devs.append(d)
    return devs


def _counter_pool(devices: list[dict[str, Any]], *claims: dict[str, Any]) -> tuple[Any, ...]:
    return (
        rslice("counters", None, count=2, counter_sets={SET: {"memory": "8Gi"}}),
        rslice("devices", devices, count=2),
        *claims,
    )


def test_compatibility_groups_checked_with_the_gate() -> None:
    objs = _counter_pool(_grouped(("a",), ("b",), ("a", "b"), ()), claim("held", result("mig-0")))
    got = states(pool(*objs, profile=K137_ALL), "devices")
    assert got["mig-0"] == ("Allocated", None)
    assert got["mig-1"] == ("Unavailable", "CompatibilityGroupConflict")
    assert got["mig-2"] == ("Available", None)
    # A device naming no group goes only with others that name none.
    assert got["mig-3"] == ("Unavailable", "CompatibilityGroupConflict")


def test_devices_naming_no_group_go_together() -> None:
    objs = _counter_pool(_grouped((), (), ("a",)), claim("held", result("mig-0")))
    got = states(pool(*objs, profile=K137_ALL), "devices")
    assert got["mig-1"] == ("Available", None)
    assert got["mig-2"] == ("Unavailable", "CompatibilityGroupConflict")


def test_compatibility_groups_without_the_gate() -> None:
    objs = _counter_pool(_grouped(("a",), ("b",)), claim("held", result("mig-0")))
    # 1.37 without the gate skips the slice: the pool looks incomplete.
    got = states(pool(*objs, profile=K137), "devices")
    assert got["mig-1"] == ("Unavailable", "CompatibilityGroupsDisabled")
    # Until 1.36 the field does not exist: the groups are dropped, nothing conflicts.
    assert states(pool(*objs, profile=K136), "devices")["mig-1"] == ("Available", None)


def _two(name: str) -> ResourceClaim:
    obj = claim(name)
    obj["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    return ResourceClaim.from_object(obj)


def test_the_search_keeps_one_group_per_counter_set() -> None:
    objs = _counter_pool(_grouped(("a",), ("b",), ("b", "c")))
    for profile, answer in ((K137_ALL, "yes"), (K137, "no"), (K136, "yes")):
        w = world(CLASS, *objs)
        results = compute_world(w, EngineOptions(profile=profile))
        classes = {c.name: c for c in w.classes}
        got = allocatable(
            _two("two"), results, classes, w.taint_rules, ["node-a"], CelEngine(), profile=profile
        )
        assert got.answer == answer, (profile.label(), got)


def test_partition_figures_keep_one_group_per_counter_set() -> None:
    devs = _grouped(("a",), ("b",), ("a",))
    for d in devs:
        d["attributes"] = {"profile": {"string": "1g.10gb"}}
    objs = _counter_pool(devs)
    for profile, together in ((K137_ALL, 2), (K136, 3)):
        r = pool(*objs, profile=profile, partition_attributes=("profile",))
        (part,) = r.status["partitions"]
        assert (part["available"], part["allocatable"], part["method"]) == (3, together, "exact")


def _node(name: str, *declared: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"declaredFeatures": list(declared)},
    }


def test_optional_node_operations_need_the_feature_and_the_node() -> None:
    skipping = rslice("lean", [device("gpu-0")], node=None, skipNodeOperations=["*"])
    objs = (skipping, _node("node-a", "DRAOptionalNodeOperations"), _node("node-b"))
    k137 = make_profile("1.37", {"DRAOptionalNodeOperations": True})
    # node-a declares the feature: allocatable there.
    assert states(pool(*objs, profile=k137))["gpu-0"] == ("Available", None)
    alone = (skipping, _node("node-b"))
    assert states(pool(*alone, profile=k137))["gpu-0"] == (
        "Unavailable",
        "NodeLacksOptionalNodeOperations",
    )
    # The experimental allocator without the feature refuses it on every node; the
    # incubating one (1.37's defaults) does not read the field.
    without = make_profile("1.37", {"DRADeviceCompatibilityGroups": True})
    assert without.implementation == "experimental"
    assert states(pool(*objs, profile=without))["gpu-0"] == (
        "Unavailable",
        "OptionalNodeOperationsDisabled",
    )
    assert states(pool(*objs, profile=K137))["gpu-0"] == ("Available", None)


def test_a_node_named_by_its_slice_declares_what_its_status_says() -> None:
    named = rslice("lean", [device("gpu-0")], node="node-b", skipNodeOperations=["*"])
    k137 = make_profile("1.37", {"DRAOptionalNodeOperations": True})
    assert states(pool(named, _node("node-b"), profile=k137))["gpu-0"] == (
        "Unavailable",
        "NodeLacksOptionalNodeOperations",
    )
    declared = _node("node-b", "DRAOptionalNodeOperations")
    assert states(pool(named, declared, profile=k137))["gpu-0"] == ("Available", None)
    # A Node object without a status (or none at all): nothing is known, taken to declare.
    bare = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}}
    assert states(pool(named, bare, profile=k137))["gpu-0"] == ("Available", None)
