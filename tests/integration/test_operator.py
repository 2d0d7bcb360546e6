"""The operator against a real API server (claims allocated by writing status.allocation)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import apiserver
import pytest
from operator_helpers import (
    DRIVER,
    allocate,
    device_states,
    rslice,
    slice_status,
    uniq,
    wait_states,
)
from operator_proc import Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster


def test_slice_status_appears_with_owner(operator: Operator, crds: KubeCluster) -> None:
    pool, name = uniq("pool"), uniq("slice")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}, {"name": "gpu-1"}]))
    try:
        wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Available", None)})
        obj = slice_status(crds, name)
        assert obj is not None
        owner = obj["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("ResourceSlice", name)
        assert owner["uid"] == crds.get("resourceslice", name)["metadata"]["uid"]
        # Every write names draview as its field manager (object and status).
        with_fields = json.loads(
            crds.check(
                "get",
                "resourceslicestatuses",
                obj["metadata"]["name"],
                "-o",
                "json",
                "--show-managed-fields",
            )
        )
        managers = {m["manager"] for m in with_fields["metadata"]["managedFields"]}
        assert managers == {"draview"}, managers
        pools = json.loads(
            crds.check(
                "get", "resourcepoolstatuses", "-o", "json", f"--field-selector=spec.pool={pool}"
            )
        )["items"]
        assert len(pools) == 1 and pools[0]["status"]["summary"]["totalDevices"] == 2
    finally:
        crds.delete("resourceslice", name)


def test_claim_allocated_then_deleted(
    operator: Operator, crds: KubeCluster, kube_namespace: str
) -> None:
    pool, name = uniq("pool"), uniq("slice")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}, {"name": "gpu-1"}]))
    try:
        wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Available", None)})
        rv_slice = crds.get("resourceslice", name)["metadata"]["resourceVersion"]
        allocate(crds, kube_namespace, "c1", pool, "gpu-1")
        wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Allocated", None)})
        obj = slice_status(crds, name)
        assert obj is not None
        alloc = obj["status"]["devices"][1]["allocations"][0]
        assert (alloc["claimNamespace"], alloc["claimName"]) == (kube_namespace, "c1")
        rv_claim = crds.get("resourceclaim", "c1", kube_namespace)["metadata"]["resourceVersion"]
        crds.delete("resourceclaim", "c1", namespace=kube_namespace)
        wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Available", None)})
        # The operator never writes what it watches.
        assert crds.get("resourceslice", name)["metadata"]["resourceVersion"] == rv_slice
        assert rv_claim  # read before deletion: nothing but the test touched the claim
    finally:
        crds.delete("resourceslice", name)


def test_a_status_another_writer_touched_is_still_written(
    operator: Operator, crds: KubeCluster, kube_namespace: str
) -> None:
    """A changed status is replaced at the resourceVersion the operator last saw. Once
    someone else has written the object, the API server refuses that (409); the operator
    reads the object back and replaces the status at its new version: nothing lost,
    nothing of theirs (a label) undone."""
    pool, name = uniq("pool"), uniq("slice")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}, {"name": "gpu-1"}]))
    try:
        wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Available", None)})
        crds.check("label", "resourceslicestatus", name, "example.com/touched=yes")

        def writes(verb: str, kind: str) -> float:
            return operator.metric("draview_api_writes_total", verb=verb, kind=kind)

        def rereads() -> float:
            return operator.metric("draview_api_rereads_total", kind="resourceslicestatuses")

        patches, read = writes("patch", "resourceslicestatuses"), rereads()
        updates = writes("update", "resourceslicestatuses")
        pool_updates = writes("update", "resourcepoolstatuses")
        allocate(crds, kube_namespace, "c1", pool, "gpu-1")
        wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Allocated", None)})
        # The slice's status replaced at the version read back after the refused replace;
        # the pool's, which nobody else touched, at the version the operator knew.
        assert rereads() == read + 1, operator.logs()
        assert writes("update", "resourceslicestatuses") == updates + 1
        assert writes("patch", "resourceslicestatuses") == patches
        crds.wait_for(
            "the pool status replaced",
            lambda: writes("update", "resourcepoolstatuses") == pool_updates + 1,
            timeout=30,
        )
        obj = slice_status(crds, name)
        assert obj is not None and obj["metadata"]["labels"]["example.com/touched"] == "yes"
    finally:
        crds.delete("resourceslice", name)


def test_partitionable_pool_across_slices(
    operator: Operator, crds: KubeCluster, kube_namespace: str
) -> None:
    pool = uniq("pool")
    counters, devices = f"{pool}-counters", f"{pool}-devices"
    crds.create(rslice(counters, pool, None, count=2, counters={"gpu-0-cs": {"memory": "40Gi"}}))
    devs = [
        {
            "name": n,
            "consumesCounters": [{"counterSet": "gpu-0-cs", "counters": {"memory": {"value": q}}}],
        }
        for n, q in (("whole", "40Gi"), ("half-0", "20Gi"), ("half-1", "20Gi"))
    ]
    crds.create(rslice(devices, pool, devs, count=2))
    try:
        wait_states(
            crds,
            devices,
            {
                "whole": ("Available", None),
                "half-0": ("Available", None),
                "half-1": ("Available", None),
            },
        )
        allocate(crds, kube_namespace, "part", pool, "half-0")
        wait_states(
            crds,
            devices,
            {
                "whole": ("Unavailable", "InsufficientSharedCapacity"),
                "half-0": ("Allocated", None),
                "half-1": ("Available", None),
            },
        )
        obj = slice_status(crds, counters)
        assert obj is not None
        usage = obj["status"]["counterSets"][0]["counters"]["memory"]
        assert usage == {"total": "40Gi", "consumed": "20Gi", "available": "20Gi"}
    finally:
        crds.delete("resourceslice", counters, devices)


def test_duplicate_device_makes_the_pool_invalid_and_deletion_cleans_up(
    operator: Operator, crds: KubeCluster
) -> None:
    pool = uniq("pool")
    a, b = f"{pool}-a", f"{pool}-b"
    crds.create(
        rslice(a, pool, [{"name": "gpu-0"}], count=2),
        rslice(b, pool, [{"name": "gpu-0"}, {"name": "gpu-1"}], count=2),
    )
    try:
        wait_states(
            crds,
            b,
            {"gpu-0": ("Unavailable", "PoolInvalid"), "gpu-1": ("Unavailable", "PoolInvalid")},
        )
        obj = slice_status(crds, a)
        assert obj is not None
        brief = obj["status"]["poolStatus"]
        assert {c["type"]: c["status"] for c in brief["conditions"]}["Valid"] == "False"
        assert brief["validationErrors"][0].startswith("DuplicateDevice:")
        assert (
            operator.metric("dra_pool_validation_errors_total", pool=pool, type="DuplicateDevice")
            >= 1
        )
    finally:
        crds.delete("resourceslice", a, b)
    crds.wait_for(
        "slice statuses removed",
        lambda: slice_status(crds, a) is None and slice_status(crds, b) is None,
        timeout=30,
    )
    crds.wait_for(
        "pool status removed",
        lambda: (
            json.loads(
                crds.check(
                    "get",
                    "resourcepoolstatuses",
                    "-o",
                    "json",
                    f"--field-selector=spec.pool={pool}",
                )
            )["items"]
            == []
        ),
        timeout=30,
    )


def test_device_taint_rule(operator: Operator, crds: KubeCluster) -> None:
    pool, name, rule = uniq("pool"), uniq("slice"), uniq("rule")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}, {"name": "gpu-1"}]))
    crds.create(
        {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": rule},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": pool, "device": "gpu-1"},
                "taint": {"key": "example.com/broken", "effect": "NoSchedule"},
            },
        }
    )
    try:
        wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Unavailable", "Tainted")})
        crds.delete("devicetaintrule", rule)
        wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Available", None)})
    finally:
        crds.delete("devicetaintrule", rule)
        crds.delete("resourceslice", name)


def test_generation_change(operator: Operator, crds: KubeCluster) -> None:
    pool = uniq("pool")
    old, new = f"{pool}-old", f"{pool}-new"
    crds.create(rslice(old, pool, [{"name": "gpu-0"}], generation=1))
    try:
        wait_states(crds, old, {"gpu-0": ("Available", None)})
        crds.create(rslice(new, pool, [{"name": "gpu-1"}], generation=2))
        wait_states(crds, old, {"gpu-0": ("Unavailable", "StaleGeneration")})
        wait_states(crds, new, {"gpu-1": ("Available", None)})
    finally:
        crds.delete("resourceslice", old, new)


def test_restart_with_an_unchanged_world_writes_nothing(
    operator: Operator, crds: KubeCluster, tmp_path: Path
) -> None:
    pool, name = uniq("pool"), uniq("slice")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}]))
    try:
        wait_states(crds, name, {"gpu-0": ("Available", None)})
        second = Operator(crds.kubeconfig, ("--leader-elect", "false")).start(tmp_path)
        try:
            second.wait_ready()
            assert second.metric("draview_api_writes_total") == 0, second.logs()
            # Nothing handed to the writer is left: the gauge a restart waits on.
            _, text = second.get("/metrics")
            assert "\ndraview_writes_pending 0.0\n" in text, text
        finally:
            assert second.stop() == 0
    finally:
        crds.delete("resourceslice", name)


def _allocate_gpu_0(
    crds: KubeCluster, namespace: str, claim: str, pool: str, name: str, timeout: float
) -> None:
    """Allocate gpu-0 of a two-GPU slice and wait until the operator shows it."""
    allocate(crds, namespace, claim, pool, "gpu-0")
    crds.wait_for(
        f"allocation by {claim} seen",
        lambda: (
            device_states(crds, name)
            == {"gpu-0": ("Allocated", None), "gpu-1": ("Available", None)}
        ),
        timeout=timeout,
    )


def test_apiserver_down_for_20s_then_converges(
    operator: Operator, crds: KubeCluster, kube_namespace: str
) -> None:
    if os.environ.get("KUBECONFIG"):  # an external cluster's API server is not ours to kill
        pytest.skip("needs the local control plane (e2e/cluster), not an external cluster")
    pid = apiserver.pid()
    pool, name = uniq("pool"), uniq("slice")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}, {"name": "gpu-1"}]))
    wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Available", None)})
    cmd = apiserver.command(pid)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while not apiserver.gone(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(20)
    apiserver.start(cmd)
    crds.wait_for(
        "API server ready", lambda: crds.run("get", "--raw", "/readyz").returncode == 0, timeout=120
    )
    try:
        assert operator.get("/healthz")[0] == 200
        _allocate_gpu_0(crds, kube_namespace, "after-restart", pool, name, timeout=90)
    finally:
        crds.delete("resourceslice", name)


def test_a_silent_watch_is_given_up_and_resumed(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    """A watch connection that stays open but carries nothing (here: the API server
    frozen with SIGSTOP) is dropped after --watch-silence-timeout and resumed from the
    last version seen, not held until the request's 330 s limit; nothing is lost."""
    if os.environ.get("KUBECONFIG"):
        pytest.skip("needs the local control plane (e2e/cluster), not an external cluster")
    pid = apiserver.pid()
    op = Operator(
        crds.kubeconfig, ("--leader-elect", "false", "--watch-silence-timeout", "3")
    ).start(tmp_path)
    pool, name = uniq("pool"), uniq("slice")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}, {"name": "gpu-1"}]))
    try:
        op.wait_ready()
        wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Available", None)})
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(8)
        finally:
            os.kill(pid, signal.SIGCONT)
        crds.wait_for(
            "API server ready", lambda: crds.run("get", "--raw", "/readyz").returncode == 0
        )
        given_up = [
            line
            for line in op.logs().splitlines()
            if "watch failed; resuming" in line and "resourceslices" in line
        ]
        assert given_up, op.logs()
        _allocate_gpu_0(crds, kube_namespace, "after-silence", pool, name, timeout=60)
    finally:
        assert op.stop() == 0, op.logs()
        crds.delete("resourceslice", name)


def test_a_broken_pool_never_stops_the_others(operator: Operator, crds: KubeCluster) -> None:
    bad, good = uniq("pool"), uniq("pool")
    # The API server accepts this (the reference crosses slices); the allocator would not.
    # Three slices for a count of two: the allocator finds the pool incomplete and never
    # validates it; the validation errors are still listed, for when it is complete.
    crds.create(
        rslice(
            f"{bad}-a",
            bad,
            [
                {
                    "name": "p",
                    "consumesCounters": [
                        {"counterSet": "no-such-set", "counters": {"memory": {"value": "1Gi"}}}
                    ],
                }
            ],
            count=2,
        ),
        rslice(f"{bad}-b", bad, None, count=2, counters={"cs": {"memory": "1Gi"}}),
        rslice(f"{bad}-c", bad, None, count=2, counters={"cs": {"memory": "1Gi"}}),
    )
    crds.create(rslice(f"{good}-a", good, [{"name": "gpu-0"}]))
    try:
        wait_states(crds, f"{bad}-a", {"p": ("Unavailable", "PoolIncomplete")})
        wait_states(crds, f"{good}-a", {"gpu-0": ("Available", None)})
        obj = slice_status(crds, f"{bad}-a")
        assert obj is not None
        errors = obj["status"]["poolStatus"]["validationErrors"]
        assert {e.split(":")[0] for e in errors} == {"CounterSetNotFound", "DuplicateCounterSet"}
    finally:
        crds.delete("resourceslice", f"{bad}-a", f"{bad}-b", f"{bad}-c", f"{good}-a")
