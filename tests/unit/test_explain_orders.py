"""A claim's verdict where 1.34's and 1.35's allocator walks pools in Go map order and a
pool's slices in list order (rules.pools_sorted, rules.search_resumes off): exact over
every order, Uncertain where the order decides. Each world was asked of the allocator
library of v0.35.10 and v0.36.6 (tests/fidelity, many orders) with the answers below."""

from __future__ import annotations

from typing import Any

import pytest
from builders import device_class, rslice, world

from draview.api.claims import ResourceClaim
from draview.engine.model import EngineOptions
from draview.engine.profile import Profile, all_gates_on, make_profile
from draview.engine.rules import rules_for
from draview.engine.world import compute_world
from draview.explain import DeviceIndex, Explainer
from draview.explain.allocatable import ABORTS, FITS, UNSCHEDULABLE, allocatable
from draview.explain.orders import (
    Chooser,
    ListingStop,
    NeedListing,
    NoSuchListing,
    Relevance,
    every_order,
)

K135, K136 = make_profile("1.35"), make_profile("1.36")
CLASS = device_class()
A100 = "device.attributes['gpu.example.com'].model == 'A100'"
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}


def gpu(name: str, **attrs: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if attrs:
        d["attributes"] = {k: {"string": v} for k, v in attrs.items()}
    return d


def one_gpu(*selectors: str) -> ResourceClaim:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.example.com"}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return ResourceClaim.from_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        }
    )


def outcomes(profile: Profile, *objects: dict[str, Any], claim: ResourceClaim) -> set[str]:
    w = world(CLASS, *objects)
    results = compute_world(w, EngineOptions(profile=profile))
    found = allocatable(claim, results, {c.name: c for c in w.classes}, profile=profile)
    return {o for o, _ in found.outcomes}


def test_only_releases_before_136_walk_pools_in_map_order() -> None:
    assert not rules_for(K135).pools_sorted and not rules_for(K135).search_resumes
    assert rules_for(K136).pools_sorted and rules_for(K136).search_resumes


def test_a_runtime_error_in_one_pool_and_a_fit_in_another() -> None:
    objs = (
        rslice("a", [gpu("gpu-0")], pool="pool-a"),
        rslice("b", [gpu("gpu-0", model="A100")], pool="pool-b"),
    )
    # 1.35 meets pool-b first in some attempts and pool-a in others.
    assert outcomes(K135, *objs, claim=one_gpu(A100)) == {FITS, ABORTS}
    # 1.36 sorts the pools: pool-a comes first, always.
    assert outcomes(K136, *objs, claim=one_gpu(A100)) == {ABORTS}


def test_a_pools_slices_come_in_list_order() -> None:
    objs = (
        rslice("a", [gpu("gpu-0")], count=2),
        rslice("b", [gpu("gpu-1", model="A100")], count=2),
    )
    assert outcomes(K135, *objs, claim=one_gpu(A100)) == {FITS, ABORTS}
    assert outcomes(K136, *objs, claim=one_gpu(A100)) == {ABORTS}


def test_without_a_solution_every_order_meets_the_error() -> None:
    objs = (
        rslice("a", [gpu("gpu-0")], pool="pool-a"),
        rslice("b", [gpu("gpu-0", model="H100")], pool="pool-b"),
    )
    assert outcomes(K135, *objs, claim=one_gpu(A100)) == {ABORTS}


def test_the_first_slice_listed_decides_the_count_and_is_walked_first() -> None:
    # Slice a (count 2) listed first: the pool is complete and its broken device is met
    # first; slice b (count 3) listed first: the pool looks incomplete. Never a fit.
    objs = (
        NODE,
        rslice("a", [gpu("gpu-0")], count=2, node=None, allNodes=True),
        rslice("b", [gpu("gpu-1", model="A100")], count=3, node=None, allNodes=True),
    )
    assert outcomes(K135, *objs, claim=one_gpu(A100)) == {UNSCHEDULABLE, ABORTS}
    assert outcomes(K136, *objs, claim=one_gpu(A100)) == {UNSCHEDULABLE, ABORTS}


def test_a_node_that_always_aborts_decides_the_attempt() -> None:
    # node-a may fit (pool-b first) or abort; node-b sees only the broken pool-a: every
    # attempt aborts, whatever node-a does.
    objs = (
        rslice("a", [gpu("gpu-0")], pool="pool-a", node=None, allNodes=True),
        rslice("b", [gpu("gpu-0", model="A100")], pool="pool-b", node="node-a"),
        rslice("c", [gpu("gpu-9", model="H100")], pool="pool-c", node="node-b"),
    )
    assert outcomes(K135, *objs, claim=one_gpu(A100)) == {ABORTS}


def _fits_on(name: str, fits: str, breaks: str) -> dict[str, Any]:
    """A slice, devices selected per device: an A100 on `fits`, a device whose selector
    fails in CEL (no model) on `breaks`."""
    devices = [
        {**gpu(f"{name}-a100", model="A100"), "nodeName": fits},
        {**gpu(f"{name}-broken"), "nodeName": breaks},
    ]
    return rslice(name, devices, count=2, node=None, perDeviceNodeSelection=True)


def test_the_nodes_of_one_attempt_share_the_list_order_of_a_pools_slices() -> None:
    # One pool. Listed s1 first, node-a meets its A100 and fits while node-b meets s1's
    # broken device and aborts the attempt; listed s2 first, the other way round. Each
    # node alone may fit, but no attempt fits: the scheduler lists the slices once for
    # all the nodes it filters.
    nodes = ({**NODE, "metadata": {"name": n}} for n in ("node-a", "node-b"))
    objs = (*nodes, _fits_on("s1", "node-a", "node-b"), _fits_on("s2", "node-b", "node-a"))
    # Per-device node selection needs DRAPartitionableDevices: every gate on.
    assert outcomes(all_gates_on("1.35"), *objs, claim=one_gpu(A100)) == {ABORTS}
    assert outcomes(all_gates_on("1.34"), *objs, claim=one_gpu(A100)) == {ABORTS}
    # 1.36 walks the slices by name: s1 first, always, and node-b aborts.
    assert outcomes(all_gates_on("1.36"), *objs, claim=one_gpu(A100)) == {ABORTS}


class _Spends:
    """A search that spends steps, then stops under the listing."""

    def __init__(self, stop: ListingStop, budget: int) -> None:
        self.stop, self.budget = stop, budget

    def run(self) -> str:
        self.budget -= 7
        raise self.stop


@pytest.mark.parametrize("stop", [NeedListing(("d", "p")), NoSuchListing()])
def test_a_walk_stopped_by_its_listing_still_pays_for_its_steps(stop: ListingStop) -> None:
    # Either stop leaves the question: what the walk spent must leave with it, or a
    # question dropping listing after listing never runs out of budget.
    def make(_: Chooser, budget: int) -> _Spends:
        return _Spends(stop, budget)

    with pytest.raises(ListingStop) as raised:
        every_order(make, Relevance(hazard=True), 100, (), listed={})
    assert raised.value is stop and raised.value.budget == 93


def test_why_names_both_outcomes() -> None:
    w = world(
        CLASS,
        rslice("a", [gpu("gpu-0")], pool="pool-a"),
        rslice("b", [gpu("gpu-0", model="A100")], pool="pool-b"),
    )
    results = compute_world(w, EngineOptions(profile=K135))
    index = DeviceIndex.build(results, w.taint_rules)
    exp = Explainer().explain(one_gpu(A100), index, w.classes, results=results)
    assert exp.verdict == "Uncertain"
    assert "node-a" in exp.summary and "CEL runtime error" in exp.summary


# -- 1.34 (experimental, v0.34.13) --------------------------------------------------------

K134, K134_ALL, K135_ALL = make_profile("1.34"), all_gates_on("1.34"), all_gates_on("1.35")


def claim_of(*requests: dict[str, Any], constraints: list[Any] | None = None) -> ResourceClaim:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return ResourceClaim.from_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": devices},
        }
    )


def request(name: str, **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu.example.com", **exactly}}


def test_134_aborts_when_its_walk_meets_an_invalid_pool() -> None:
    objs = (
        rslice("bad-1", [gpu("gpu-0")], pool="bad", count=2),
        rslice("bad-2", [gpu("gpu-0")], pool="bad", count=2),
        rslice("good", [gpu("gpu-1", model="A100")], pool="good"),
    )
    assert outcomes(K134, *objs, claim=one_gpu(A100)) == {FITS, ABORTS}
    # From 1.35 the invalid pool only keeps the node from offering its own devices.
    assert outcomes(K135, *objs, claim=one_gpu(A100)) == {FITS}


def test_134_allocates_from_a_pool_that_looks_incomplete() -> None:
    objs = (rslice("a", [gpu("gpu-0", model="A100")], count=2),)
    assert outcomes(K134, *objs, claim=one_gpu(A100)) == {FITS}
    assert outcomes(K135, *objs, claim=one_gpu(A100)) == {UNSCHEDULABLE}
    # ... but not all of its devices.
    every = claim_of(request("all", allocationMode="All"))
    assert outcomes(K134, *objs, claim=every) == {ABORTS}


def test_134_distinct_values_are_told_apart_by_device() -> None:
    # Both devices have model A100; 1.34 compares the values' pointers, which differ.
    objs = (rslice("a", [gpu("gpu-0", model="A100"), gpu("gpu-1", model="A100")]),)
    pair = claim_of(
        request("one"),
        request("two"),
        constraints=[{"distinctAttribute": "gpu.example.com/model"}],
    )
    assert outcomes(K134_ALL, *objs, claim=pair) == {FITS}
    assert outcomes(K135_ALL, *objs, claim=pair) == {UNSCHEDULABLE}


def test_134_rechecks_capacity_at_the_requests_device_index() -> None:
    # The second device of a request is checked against device 1 of its own slice; a
    # slice of one device has none (an index out of range in the allocator).
    objs = (
        rslice("a", [gpu("gpu-0")], count=2),
        rslice("b", [gpu("gpu-1")], count=2),
    )
    two = claim_of(request("two", count=2))
    assert outcomes(K134_ALL, *objs, claim=two) == {ABORTS}
    assert outcomes(K135_ALL, *objs, claim=two) == {FITS}
    assert outcomes(K134, *objs, claim=two) == {FITS}  # no recheck without the gate


def test_134_meets_an_invalid_pool_with_binding_conditions_last() -> None:
    bound = gpu("gpu-0")
    bound["bindingConditions"] = ["example.com/attached"]
    objs = (
        rslice("bad-1", [gpu("gpu-0")], pool="bad", count=2),
        rslice("bad-2", [bound], pool="bad", count=2),
        rslice("good", [gpu("gpu-1", model="A100")], pool="good"),
    )
    # GatherPools puts "bad" after "good": the walk finds gpu-1 first, always.
    assert outcomes(K134_ALL, *objs, claim=one_gpu(A100)) == {FITS}
