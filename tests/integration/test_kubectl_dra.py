"""`kubectl dra` against the local control plane: RBAC elision, `why` naming the blocker
the real scheduler hit, and CEL parity with the scheduler's allocation outcome."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_helpers import declare_features
from test_control_plane import (
    NODE,
    Driver,
    claim,
    device_class,
    pod,
    resource_slice,
    scheduled_node,
    unschedulable,
)

from draview.api.world import build_world
from draview.engine.world import world_objects
from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def driver(kube_cluster: KubeCluster) -> Iterator[Driver]:
    d = Driver(kube_cluster)
    try:
        yield d
    finally:
        d.cleanup()


def dra(
    cluster: KubeCluster, *args: str, kubeconfig: str | None = None, kubectl: bool = False
) -> subprocess.CompletedProcess[str]:
    """The plugin as a user runs it: asking the API server itself, or (kubectl=True)
    through kubectl, as --kubectl / $DRAVIEW_KUBECTL ask."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "operator")}
    env.pop("DRAVIEW_KUBECTL", None)
    if kubectl:
        env["DRAVIEW_KUBECTL"] = cluster.kubectl
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "draview.cli.dra.main",
            "--kubeconfig",
            kubeconfig or cluster.kubeconfig,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def outcome(cluster: KubeCluster, namespace: str, pod_name: str) -> str:
    """'scheduled' or 'unschedulable', as the real scheduler decided."""

    def probe() -> str | None:
        if scheduled_node(cluster, namespace, pod_name):
            return "scheduled"
        if unschedulable(cluster, namespace, pod_name):
            return "unschedulable"
        # A CEL runtime error is a scheduler error (reason SchedulerError), not Unschedulable.
        conds = cluster.get("pod", pod_name, namespace).get("status", {}).get("conditions", [])
        if any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conds):
            return "unschedulable"
        return None

    return cluster.wait_for(f"scheduling of {pod_name}", probe, timeout=90)


def why(cluster: KubeCluster, namespace: str, name: str) -> dict[str, Any]:
    proc = dra(cluster, "why", name, "-n", namespace, "--live", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


# -- (b) why names the blocker the scheduler hit -----------------------------------------


def test_why_names_an_allocated_device_and_a_taint(
    kube_cluster: KubeCluster, kube_namespace: str, driver: Driver, tmp_path: Path
) -> None:
    dc = f"gpu-{driver.suffix}"
    driver.apply(
        device_class(driver, dc),
        resource_slice(
            driver,
            f"{dc}-slice",
            pool=NODE,
            devices=[
                {"name": "gpu-0", "attributes": {"model": {"string": "a100"}}},
                {"name": "gpu-1", "attributes": {"model": {"string": "h100"}}},
                {
                    "name": "gpu-2",
                    "attributes": {"model": {"string": "l4"}},
                    "taints": [{"key": "example.com/xid", "value": "79", "effect": "NoSchedule"}],
                },
            ],
        ),
    )
    h100 = f'device.attributes["{driver.name}"].model == "h100"'
    l4 = f'device.attributes["{driver.name}"].model == "l4"'
    kube_cluster.create(claim("first", dc, h100), pod("first", "first"), namespace=kube_namespace)
    assert outcome(kube_cluster, kube_namespace, "first") == "scheduled"
    kube_cluster.create(
        claim("second", dc, h100),
        pod("second", "second"),
        claim("tainted", dc, l4),
        pod("tainted", "tainted"),
        namespace=kube_namespace,
    )
    assert outcome(kube_cluster, kube_namespace, "second") == "unschedulable"
    assert outcome(kube_cluster, kube_namespace, "tainted") == "unschedulable"

    second = why(kube_cluster, kube_namespace, "second")
    choice = second["requests"][0]["choices"][0]
    assert second["verdict"] == "Unallocatable"
    assert choice["blocked"] == {"Allocated": [f"{driver.name}/{NODE}/gpu-1"]}
    assert f"{kube_namespace}/first" in choice["details"][f"{driver.name}/{NODE}/gpu-1"]

    tainted = why(kube_cluster, kube_namespace, "tainted")
    assert tainted["verdict"] == "Unallocatable"
    assert list(tainted["requests"][0]["choices"][0]["blocked"]) == ["Tainted"]
    text = dra(kube_cluster, "why", "tainted", "-n", kube_namespace).stdout
    assert "example.com/xid=79:NoSchedule not tolerated" in text

    # fit, where no explain API is installed: computed here, with no note about it. The
    # h100 is held by "first" (the scheduler left "second" pending): no copy fits; the
    # a100 is free: one copy on the node. No operator judges this pool: where another
    # left status objects of its own pools, they cannot stand in for this one's claims.
    assert "Allocated" in _fit(kube_cluster, kube_namespace, dc, h100, 0, tmp_path)["summary"]
    a100 = f'device.attributes["{driver.name}"].model == "a100"'
    assert _fit(kube_cluster, kube_namespace, dc, a100, 1, tmp_path)["device"] == "gpu-0"


def _fit(
    cluster: KubeCluster, ns: str, dc: str, selector: str, copies: int, tmp_path: Path
) -> dict[str, str]:
    """`kubectl dra fit` of a claim for one device the selector picks: `copies` fit, with
    no word of an operator asked (none serves the explain API here). The next copy's
    blocker, and the first copy's device."""
    workload = tmp_path / "claim.json"
    workload.write_text(json.dumps(claim("next", dc, selector)))
    fit = dra(cluster, "fit", str(workload), "-n", ns, "-o", "json")
    assert fit.returncode == 0, fit.stderr
    assert "did not answer" not in fit.stderr, fit.stderr
    doc = json.loads(fit.stdout)
    assert doc["copies"] == copies, doc
    first = doc["firstCopy"]["devices"]
    return {"summary": doc["next"]["summary"], "device": first[0]["device"] if first else ""}


# -- (c) CEL parity with the scheduler ---------------------------------------------------

PARITY = [
    # (selector on the claim, with {d} for the driver domain); the slice has gpu-0 only
    'device.capacity["{d}"].memory.isGreaterThan(quantity("25G"))',  # 24Gi > 25G
    'device.capacity["{d}"].memory.isGreaterThan(quantity("26G"))',  # 24Gi < 26G
    'device.attributes["{d}"].driverVersion.isLessThan(semver("12.2.0"))',  # 12.2.0-rc.1
    'device.attributes["{d}"].driverVersion.isGreaterThan(semver("12.2.0-rc.0"))',
    'device.attributes["{d}"].model.lowerAscii().startsWith("h1")',
    '"model" in device.attributes["other.example.com"]',  # unknown domain: empty map
    'device.attributes["{d}"].nosuch == "x"',  # runtime error: the claim fails
    'has(device.attributes["{d}"].nosuch) || device.attributes["{d}"].model == "H100"',
    'device.attributes["{d}"].model.split("1")[0] == "H"',
    'device.capacity["{d}"].memory.compareTo(quantity("24576Mi")) == 0',
]


@pytest.mark.parametrize("selector", PARITY)
def test_cel_parity_with_the_scheduler(
    kube_cluster: KubeCluster, kube_namespace: str, driver: Driver, selector: str
) -> None:
    dc = f"gpu-{driver.suffix}"
    driver.apply(
        device_class(driver, dc),
        resource_slice(
            driver,
            f"{dc}-slice",
            pool=NODE,
            devices=[
                {
                    "name": "gpu-0",
                    "attributes": {
                        "model": {"string": "H100"},
                        "driverVersion": {"version": "12.2.0-rc.1"},
                    },
                    "capacity": {"memory": {"value": "24Gi"}},
                }
            ],
        ),
    )
    expr = selector.replace("{d}", driver.name)
    kube_cluster.create(claim("c", dc, expr), pod("p", "c"), namespace=kube_namespace)
    real = outcome(kube_cluster, kube_namespace, "p")
    if real == "scheduled":
        # Allocated now; ask about the same selector on a fresh claim against a free world.
        kube_cluster.run("delete", "pod", "p", "-n", kube_namespace, "--force", "--grace-period=0")
        kube_cluster.run("delete", "resourceclaim", "c", "-n", kube_namespace, "--wait=true")
    kube_cluster.create(claim("q", dc, expr), namespace=kube_namespace)
    mine = why(kube_cluster, kube_namespace, "q")["verdict"]
    assert (real, mine) in {
        ("scheduled", "Allocatable"),
        ("unschedulable", "Unallocatable"),
        ("unschedulable", "Error"),
    }, (expr, real, mine)


# -- (a) a restricted user sees elided claims ---------------------------------------------


def _publish_status(cluster: KubeCluster, driver_name: str) -> list[tuple[str, str]]:
    """Write what the operator would: the CRDs, then objects computed by the engine."""
    cluster.apply_crds()
    objs = json.loads(cluster.check("get", "resourceslices,resourceclaims", "-A", "-o", "json"))
    items = [
        o
        for o in objs["items"]
        if o["kind"] == "ResourceClaim" or o["spec"].get("driver") == driver_name
    ]
    created = []
    for o in world_objects(build_world(items)):
        if o["spec"]["driver"] != driver_name:
            continue
        status = o.pop("status")
        o["metadata"].pop("ownerReferences", None)
        cluster.create(o)
        plural = (
            "resourceslicestatuses"
            if o["kind"] == "ResourceSliceStatus"
            else "resourcepoolstatuses"
        )
        cluster.check(
            "patch",
            f"{plural}.draview.io",
            o["metadata"]["name"],
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )
        created.append((f"{plural}.draview.io", o["metadata"]["name"]))
    return created


def _token_kubeconfig(cluster: KubeCluster, namespace: str, sa: str, path: Path) -> str:
    admin = json.loads(cluster.check("config", "view", "--raw", "--minify", "-o", "json"))
    token = cluster.check("create", "token", sa, "-n", namespace).strip()
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [
            {"name": "x", "context": {"cluster": "c", "user": "u", "namespace": namespace}}
        ],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.mark.parametrize("through_kubectl", [False, True], ids=["api-server", "kubectl"])
def test_restricted_user_sees_elided_claims(
    kube_cluster: KubeCluster,
    kube_namespace: str,
    driver: Driver,
    tmp_path: Path,
    through_kubectl: bool,
) -> None:
    dc = f"gpu-{driver.suffix}"
    driver.apply(
        device_class(driver, dc),
        resource_slice(
            driver, f"{dc}-slice", pool=NODE, devices=[{"name": "gpu-0"}, {"name": "gpu-1"}]
        ),
    )
    kube_cluster.create(
        claim("secret-training", dc), pod("p", "secret-training"), namespace=kube_namespace
    )
    assert outcome(kube_cluster, kube_namespace, "p") == "scheduled"
    created = _publish_status(kube_cluster, driver.name)
    role = f"dra-viewer-{uuid.uuid4().hex[:6]}"
    rbac = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "viewer", "namespace": kube_namespace},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": [
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceslices"],
                    "verbs": ["get", "list"],
                },
                {
                    "apiGroups": ["draview.io"],
                    "resources": ["resourceslicestatuses", "resourcepoolstatuses"],
                    "verbs": ["get", "list"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": kube_namespace}],
        },
    ]
    kube_cluster.create(*rbac)
    try:
        cfg = _token_kubeconfig(
            kube_cluster, kube_namespace, "viewer", tmp_path / "viewer.kubeconfig"
        )
        time.sleep(1)  # RBAC caches in the API server settle quickly, but not instantly
        k = {"kubectl": through_kubectl}
        proc = dra(kube_cluster, "get", "devices", "--driver", driver.name, kubeconfig=cfg, **k)
        assert proc.returncode == 0, proc.stderr
        assert "secret-training" not in proc.stdout and "(1 claim)" in proc.stdout
        desc = dra(kube_cluster, "describe", "node", NODE, kubeconfig=cfg, **k)
        assert "secret-training" not in desc.stdout and "Allocated (1 claim)" in desc.stdout
        # The one slice, read by name: the same elision.
        one = dra(kube_cluster, "describe", "resourceslice", f"{dc}-slice", kubeconfig=cfg, **k)
        assert one.returncode == 0, one.stderr
        assert "secret-training" not in one.stdout and "1 claim you may not see" in one.stdout
        admin = dra(kube_cluster, "get", "devices", "--driver", driver.name, **k)
        assert f"{kube_namespace}/secret-training" in admin.stdout
    finally:
        kube_cluster.run("delete", "clusterrolebinding,clusterrole", role, "--ignore-not-found")
        for plural, name in created:
            kube_cluster.run("delete", plural, name, "--ignore-not-found")


# -- optional node operations (1.37): the scheduler reads what the node declares ---------

OPTIONAL_OPERATIONS = "DRAOptionalNodeOperations"


def _device_state(cluster: KubeCluster, driver: Driver) -> tuple[str, str | None]:
    # --live: judged here from the slices and Nodes, not read from an operator's objects
    # (another test module's operator may have left them).
    proc = dra(cluster, "get", "devices", "--driver", driver.name, "--live", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    (device,) = json.loads(proc.stdout)["items"]
    return device["state"], device.get("stateReason")


def test_skipping_node_operations_follows_what_the_node_declares(
    kube_cluster: KubeCluster, kube_namespace: str, driver: Driver
) -> None:
    """This cluster runs 1.37 with DRAOptionalNodeOperations: the real scheduler places a
    pod on a device of a slice that skips node operations only once the node declares
    the feature, and `kubectl dra` (reading the Nodes for it) says the same."""
    dc = f"gpu-{driver.suffix}"
    skipping = resource_slice(driver, f"{dc}-slice", pool=NODE, devices=[{"name": "gpu-0"}])
    skipping["spec"]["skipNodeOperations"] = ["*"]
    driver.apply(device_class(driver, dc), skipping)
    try:
        declare_features(kube_cluster, NODE)
        assert _device_state(kube_cluster, driver) == (
            "Unavailable",
            "NodeLacksOptionalNodeOperations",
        )
        kube_cluster.create(
            claim("lacking", dc), pod("lacking", "lacking"), namespace=kube_namespace
        )
        assert outcome(kube_cluster, kube_namespace, "lacking") == "unschedulable"
        kube_cluster.delete("pod", "lacking", namespace=kube_namespace)
        kube_cluster.delete("resourceclaim", "lacking", namespace=kube_namespace)

        declare_features(kube_cluster, NODE, OPTIONAL_OPERATIONS)
        assert _device_state(kube_cluster, driver) == ("Available", None)
        kube_cluster.create(
            claim("declared", dc), pod("declared", "declared"), namespace=kube_namespace
        )
        assert outcome(kube_cluster, kube_namespace, "declared") == "scheduled"
    finally:
        declare_features(kube_cluster, NODE)
