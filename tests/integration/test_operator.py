"""The operator against a real API server (claims allocated by writing status.allocation)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_proc import ROOT, Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster
DRIVER = "test.draview.io"


@pytest.fixture(scope="module")
def crds(kube_cluster: KubeCluster) -> KubeCluster:
    kube_cluster.check("apply", "-k", str(ROOT / "deploy" / "crds"))
    kube_cluster.check(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/resourceslicestatuses.draview.io",
        "crd/resourcepoolstatuses.draview.io",
    )
    return kube_cluster


@pytest.fixture(scope="module")
def operator(crds: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    op = Operator(crds.kubeconfig, ("--leader-elect", "false")).start(tmp_path_factory.mktemp("op"))
    op.wait_ready()
    yield op
    assert op.stop() == 0, op.logs()


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def rslice(
    name: str,
    pool: str,
    devices: list[dict[str, Any]] | None = None,
    *,
    count: int = 1,
    generation: int = 1,
    counters: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "nodeName": "node-1",
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
    }
    if devices is not None:
        spec["devices"] = devices
    if counters:
        spec["sharedCounters"] = [
            {"name": n, "counters": {c: {"value": v} for c, v in cs.items()}}
            for n, cs in counters.items()
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def allocate(k: KubeCluster, ns: str, name: str, pool: str, *devices: str) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "r",
                        "exactly": {
                            "deviceClassName": "test-class",
                            "allocationMode": "ExactCount",
                            "count": len(devices),
                        },
                    }
                ]
            }
        },
    }
    k.create(claim)
    results = [{"request": "r", "driver": DRIVER, "pool": pool, "device": d} for d in devices]
    patch = {
        "status": {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                            ]
                        }
                    ]
                },
            }
        }
    }
    k.check(
        "patch",
        "resourceclaim",
        name,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(patch),
    )


def slice_status(k: KubeCluster, name: str) -> dict[str, Any] | None:
    r = k.run("get", "resourceslicestatus", name, "-o", "json")
    return json.loads(r.stdout) if r.returncode == 0 else None


def device_states(k: KubeCluster, name: str) -> dict[str, tuple[str, str | None]] | None:
    obj = slice_status(k, name)
    if obj is None:
        return None
    return {
        d["name"]: (d["state"], d.get("stateReason"))
        for d in obj.get("status", {}).get("devices", [])
    }


def wait_states(k: KubeCluster, name: str, want: dict[str, tuple[str, str | None]]) -> None:
    k.wait_for(f"{name} states {want}", lambda: device_states(k, name) == want or None, timeout=30)


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
        finally:
            assert second.stop() == 0
    finally:
        crds.delete("resourceslice", name)


def test_two_replicas_one_writer_and_failover(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    lease = uniq("lease")
    args = ("--leader-elect", "true", "--lease-namespace", kube_namespace, "--lease-name", lease)
    a = Operator(crds.kubeconfig, (*args, "--identity", "replica-a")).start(tmp_path)
    a.wait_ready()
    b = Operator(crds.kubeconfig, (*args, "--identity", "replica-b")).start(tmp_path)
    pool, name = uniq("pool"), uniq("slice")
    try:
        b.wait_ready()
        assert (a.metric("draview_leader"), b.metric("draview_leader")) == (1, 0)
        crds.create(rslice(name, pool, [{"name": "gpu-0"}]))
        wait_states(crds, name, {"gpu-0": ("Available", None)})
        assert b.metric("draview_api_writes_total") == 0  # the follower never writes
        assert a.metric("draview_api_writes_total") > 0
        assert a.stop() == 0  # releases the lease on SIGTERM
        crds.wait_for("replica-b leads", lambda: b.metric("draview_leader") == 1, timeout=30)
        crds.create(rslice(f"{name}-2", pool, [{"name": "gpu-1"}], count=1))
        crds.wait_for("new leader writes", lambda: slice_status(crds, f"{name}-2"), timeout=30)
    finally:
        a.stop()
        b.stop()
        crds.delete("resourceslice", name, f"{name}-2")


def _apiserver_pidfile() -> Path:
    state = os.environ.get(
        "DRAVIEW_CLUSTER_DIR", str(Path.home() / ".cache" / "draview-cluster" / "run")
    )
    return Path(state) / "pids" / "kube-apiserver.pid"


def test_apiserver_down_for_20s_then_converges(
    operator: Operator, crds: KubeCluster, kube_namespace: str
) -> None:
    pidfile = _apiserver_pidfile()
    if not pidfile.exists():  # decided at run time: the session fixture starts the plane
        pytest.skip("needs the local control plane (e2e/cluster), not an external cluster")
    pool, name = uniq("pool"), uniq("slice")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}, {"name": "gpu-1"}]))
    wait_states(crds, name, {"gpu-0": ("Available", None), "gpu-1": ("Available", None)})
    pid = int(pidfile.read_text())
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    log = pidfile.parent.parent / "logs" / "kube-apiserver.log"
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(20)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [c.decode() for c in cmdline],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pidfile.write_text(f"{proc.pid}\n")  # so that e2e/cluster/down stops this one
    crds.wait_for(
        "API server ready", lambda: crds.run("get", "--raw", "/readyz").returncode == 0, timeout=120
    )
    try:
        assert operator.get("/healthz")[0] == 200
        allocate(crds, kube_namespace, "after-restart", pool, "gpu-0")
        crds.wait_for(
            "allocation after the restart",
            lambda: (
                device_states(crds, name)
                == {"gpu-0": ("Allocated", None), "gpu-1": ("Available", None)}
            ),
            timeout=90,
        )
    finally:
        crds.delete("resourceslice", name)


def test_a_broken_pool_never_stops_the_others(operator: Operator, crds: KubeCluster) -> None:
    bad, good = uniq("pool"), uniq("pool")
    # The API server accepts this (the reference crosses slices); the allocator would not.
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
        wait_states(crds, f"{bad}-a", {"p": ("Unavailable", "PoolInvalid")})
        wait_states(crds, f"{good}-a", {"gpu-0": ("Available", None)})
        obj = slice_status(crds, f"{bad}-a")
        assert obj is not None
        errors = obj["status"]["poolStatus"]["validationErrors"]
        assert {e.split(":")[0] for e in errors} == {"CounterSetNotFound", "DuplicateCounterSet"}
    finally:
        crds.delete("resourceslice", f"{bad}-a", f"{bad}-b", f"{bad}-c", f"{good}-a")


def test_slice_status_is_garbage_collected_with_its_slice(
    crds: KubeCluster, tmp_path: Path
) -> None:
    """With no operator running, Kubernetes' garbage collector alone removes the status
    object through its ownerReference."""
    pool, name = uniq("pool"), uniq("slice")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}]))
    op = Operator(crds.kubeconfig, ("--leader-elect", "false")).start(tmp_path)
    try:
        op.wait_ready()
        wait_states(crds, name, {"gpu-0": ("Available", None)})
    finally:
        assert op.stop() == 0
    crds.delete("resourceslice", name)
    crds.wait_for("garbage collection", lambda: slice_status(crds, name) is None, timeout=60)


def test_pending_claim_gets_one_event_saying_why(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    cls = uniq("nothing-matches")
    crds.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": cls},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "no.such.driver"'}}]},
        }
    )
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "stuck", "namespace": kube_namespace},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": cls}}]}},
    }
    crds.create(claim)
    args = ("--leader-elect", "false", "--pending-threshold", "1", "--explain-interval", "1")
    op = Operator(crds.kubeconfig, args).start(tmp_path)
    try:
        op.wait_ready()

        def events() -> list[dict[str, Any]] | None:
            out = json.loads(
                crds.check(
                    "get",
                    "events",
                    "-n",
                    kube_namespace,
                    "-o",
                    "json",
                    "--field-selector=reason=DRAViewUnallocatable",
                )
            )["items"]
            return out or None

        found = crds.wait_for("an Event on the pending claim", events, timeout=60)
        assert found[0]["involvedObject"]["name"] == "stuck"
        assert found[0]["type"] == "Warning" and found[0]["message"]
        time.sleep(3)  # several more explain rounds: the explanation did not change
        again = events() or []
        assert len(again) == 1 and again[0].get("count", 1) == found[0].get("count", 1)
    finally:
        assert op.stop() == 0, op.logs()
        crds.delete("deviceclass", cls)
