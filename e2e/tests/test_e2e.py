"""End to end, against any cluster: the local control plane (default) or $KUBECONFIG (kind).

Uses the draview Deployment when one runs in the cluster (e2e/kind/run.sh installs the
chart); otherwise starts `draview run` as a local process. The oracle is the real
scheduler: a device draview calls Available is allocated to a claim that selects exactly
it, and a pod whose claim selects a device draview calls Unavailable stays Pending.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubecluster import KubeCluster

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from operator_proc import Operator  # noqa: E402

pytestmark = pytest.mark.cluster
PAUSE = "registry.k8s.io/pause:3.10"


@pytest.fixture(scope="module")
def draview(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """'deployment' when draview runs in the cluster, else 'process' (started here)."""
    k = kube_cluster
    deployments = json.loads(
        k.check("get", "deployments", "-A", "-l", "app.kubernetes.io/name=draview", "-o", "json")
    )["items"]
    if any((d.get("status") or {}).get("readyReplicas") for d in deployments):
        yield "deployment"
        return
    k.check("apply", "-k", str(ROOT / "deploy" / "crds"))
    crds = ("crd/resourceslicestatuses.draview.io", "crd/resourcepoolstatuses.draview.io")
    k.check("wait", "--for=condition=Established", "--timeout=60s", *crds)
    op = Operator(k.kubeconfig, ("--leader-elect", "false")).start(
        tmp_path_factory.mktemp("e2e-operator")
    )
    try:
        op.wait_ready()
        yield "process"
    finally:
        assert op.stop() == 0, op.logs()


def ready_node(k: KubeCluster) -> str:
    """A Ready node that takes pods (fake node-1..N locally, a real node on kind)."""
    nodes = json.loads(k.check("get", "nodes", "-o", "json"))["items"]
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        ready = any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in node.get("status", {}).get("conditions", [])
        )
        blocked = any(
            t.get("effect") in ("NoSchedule", "NoExecute")
            for t in node.get("spec", {}).get("taints") or []
        )
        if ready and not blocked and not node["spec"].get("unschedulable"):
            return str(node["metadata"]["name"])
    pytest.fail("no Ready, schedulable node")


class World:
    """A driver of its own: one pool on one node, a DeviceClass, claims and pods."""

    def __init__(self, k: KubeCluster, ns: str, node: str) -> None:
        self.k, self.ns, self.node = k, ns, node
        tag = uuid.uuid4().hex[:6]
        self.driver = f"e2e-{tag}.draview.io"
        self.pool = f"e2e-{tag}"
        self.slices = [f"e2e-{tag}-devices", f"e2e-{tag}-counters"]
        self.device_class = f"e2e-{tag}"

    def device(self, name: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "attributes": {"id": {"string": name}}, **extra}

    def create(self) -> None:
        pool = {"name": self.pool, "generation": 1, "resourceSliceCount": 2}
        common = {"driver": self.driver, "nodeName": self.node, "pool": pool}
        mem = {"name": "mem", "counters": {"memory": {"value": "10Gi"}}}
        consumes = [{"counterSet": "mem", "counters": {"memory": {"value": "6Gi"}}}]
        devices = [
            self.device("plain"),
            self.device("tainted", taints=[{"key": "e2e", "value": "x", "effect": "NoSchedule"}]),
            self.device("part-a", consumesCounters=consumes),
            self.device("part-b", consumesCounters=consumes),
        ]
        self.k.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": self.device_class},
                "spec": {
                    "selectors": [{"cel": {"expression": f'device.driver == "{self.driver}"'}}]
                },
            },
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": self.slices[0]},
                "spec": {**common, "devices": devices},
            },
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": self.slices[1]},
                "spec": {**common, "sharedCounters": [mem]},
            },
        )

    def delete(self) -> None:
        self.k.delete("resourceslice", *self.slices)
        self.k.delete("deviceclass", self.device_class)

    def states(self) -> dict[str, tuple[str, str]]:
        """draview's view: device -> (state, stateReason)."""
        out = self.k.run("get", "resourceslicestatus", self.slices[0], "-o", "json")
        if out.returncode != 0:
            return {}
        status = json.loads(out.stdout).get("status") or {}
        return {
            d["name"]: (d["state"], d.get("stateReason", "")) for d in status.get("devices", [])
        }

    def wait_state(self, device: str, state: str, reason: str = "") -> None:
        def probe() -> bool:
            got = self.states().get(device)
            return got is not None and got[0] == state and (not reason or got[1] == reason)

        self.k.wait_for(
            f"draview to call {device} {state} {reason}".strip(), probe, timeout=30, interval=0.3
        )

    def claim_pod(self, device: str) -> str:
        """A claim selecting exactly `device` and a pod using it; returns the pod's name."""
        name = f"{device}-{uuid.uuid4().hex[:4]}"
        attr = f'device.attributes["{self.driver}"].id'
        cel = f'device.driver == "{self.driver}" && {attr} == "{device}"'
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "dev",
                            "exactly": {
                                "deviceClassName": self.device_class,
                                "selectors": [{"cel": {"expression": cel}}],
                            },
                        }
                    ]
                }
            },
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "resourceClaims": [{"name": "dev", "resourceClaimName": name}],
                "containers": [
                    {"name": "pause", "image": PAUSE, "resources": {"claims": [{"name": "dev"}]}}
                ],
            },
        }
        self.k.create(claim, pod)
        return name

    def scheduled(self, pod: str) -> bool | None:
        """True once bound (and the claim allocated), False once Unschedulable."""
        obj = self.k.get("pod", pod, namespace=self.ns)
        if obj["spec"].get("nodeName"):
            return True
        for c in obj.get("status", {}).get("conditions", []):
            unschedulable = c.get("reason") == "Unschedulable"
            if c["type"] == "PodScheduled" and c["status"] == "False" and unschedulable:
                return False
        return None

    def wait_scheduled(self, pod: str) -> bool:
        result: list[bool] = []

        def probe() -> bool:
            got = self.scheduled(pod)
            if got is not None:
                result.append(got)
            return got is not None

        self.k.wait_for(f"the scheduler to decide on {pod}", probe, timeout=60, interval=0.3)
        return result[-1]


@pytest.fixture
def world(kube_cluster: KubeCluster, kube_namespace: str, draview: str) -> Iterator[World]:
    w = World(kube_cluster, kube_namespace, ready_node(kube_cluster))
    w.create()
    try:
        yield w
    finally:
        w.delete()  # kube_namespace removes the pods and claims


def test_draview_states_agree_with_the_real_scheduler(world: World) -> None:
    w = world
    started = time.monotonic()
    w.wait_state("plain", "Available")
    w.wait_state("tainted", "Unavailable", "Tainted")
    w.wait_state("part-a", "Available")
    w.wait_state("part-b", "Available")

    # Unavailable (tainted): the scheduler cannot allocate it either.
    pending = w.claim_pod("tainted")
    assert w.wait_scheduled(pending) is False
    # Available: the scheduler allocates exactly that device, and draview follows.
    pod = w.claim_pod("plain")
    assert w.wait_scheduled(pod) is True
    claim = w.k.get("resourceclaim", pod, namespace=w.ns)
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [(w.driver, w.pool, "plain")]
    w.wait_state("plain", "Allocated")

    # Partitionable: part-a takes 6Gi of the 10Gi counter, so part-b no longer fits.
    pod = w.claim_pod("part-a")
    assert w.wait_scheduled(pod) is True
    w.wait_state("part-a", "Allocated")
    w.wait_state("part-b", "Unavailable", "InsufficientSharedCapacity")
    pending_b = w.claim_pod("part-b")
    assert w.wait_scheduled(pending_b) is False

    # Every device draview still calls Available really is allocatable; none other is.
    for device, (state, _) in sorted(w.states().items()):
        if state == "Available":
            assert w.wait_scheduled(w.claim_pod(device)) is True, device
    assert w.scheduled(pending) is False and w.scheduled(pending_b) is False

    pools = json.loads(w.k.check("get", "resourcepoolstatuses", "-o", "json"))["items"]
    mine = [p for p in pools if p["spec"]["driver"] == w.driver]
    assert len(mine) == 1
    summary = mine[0]["status"]["summary"]
    assert summary["totalDevices"] == 4 and summary["allocatedDevices"] == 2
    assert time.monotonic() - started < 120
