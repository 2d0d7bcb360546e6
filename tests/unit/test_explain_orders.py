"""A claim's verdict where 1.34's and 1.35's allocator walks pools in Go map order and a
pool's slices in list order (rules.pools_sorted, rules.search_resumes off): exact over
every order, Uncertain where the order decides. Each world was asked of the allocator
library of v0.35.10 and v0.36.6 (tests/fidelity, many orders) with the answers below."""

from __future__ import annotations

from typing import Any

from builders import DRIVER, rslice, world

from draview.api.claims import ResourceClaim
from draview.engine.model import EngineOptions
from draview.engine.profile import Profile, make_profile
from draview.engine.rules import rules_for
from draview.engine.world import compute_world
from draview.explain import DeviceIndex, Explainer
from draview.explain.allocatable import ABORTS, FITS, UNSCHEDULABLE, allocatable

K135, K136 = make_profile("1.35"), make_profile("1.36")
CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
}
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
