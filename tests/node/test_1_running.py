"""draview as users run it: its image, installed with `helm install` into a namespace that
enforces the `restricted` Pod Security Standard, two replicas on a real kubelet node,
following the ResourceSlices of a real DRA driver (Kubernetes' test driver) while the
kubelet prepares its devices for real Pods.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubecluster import REPO_ROOT, KubeCluster
from node import DRIVER, Release, setting

pytestmark = pytest.mark.cluster
NODE = "draview-node"


@pytest.fixture
def workload_ns(kube_cluster: KubeCluster) -> Iterator[str]:
    """A namespace for test Pods, under `restricted` like the operator's."""
    name = kube_cluster.create_namespace("node-test")
    kube_cluster.check("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
    try:
        yield name
    finally:
        kube_cluster.check("delete", "namespace", name, "--wait=true", "--timeout=120s")


def device_states(k: KubeCluster) -> dict[str, dict[str, Any]]:
    """The test driver's devices on the node, as draview's ResourceSliceStatus says."""
    selector = f"spec.driver={DRIVER},spec.nodeName={NODE}"
    out = json.loads(k.check("get", "resourceslices", "-o", "json", "--field-selector", selector))[
        "items"
    ]
    assert len(out) == 1, [s["metadata"]["name"] for s in out]
    r = k.run("get", "resourceslicestatus", out[0]["metadata"]["name"], "-o", "json")
    if r.returncode != 0:
        return {}
    return {d["name"]: d for d in json.loads(r.stdout).get("status", {}).get("devices", [])}


def restricted_pod(name: str, image: str, claims: list[dict[str, str]]) -> dict[str, Any]:
    """A Pod that the restricted Pod Security Standard admits, using the given claims."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "env | sort; exec sleep 3600"],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "resources": {"claims": [{"name": c["name"]} for c in claims]},
                }
            ],
            "resourceClaims": claims,
        },
    }


def claim_template(name: str, device_class: str, count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "dev",
                            "exactly": {
                                "deviceClassName": device_class,
                                "allocationMode": "ExactCount",
                                "count": count,
                            },
                        }
                    ],
                    "config": [
                        {"opaque": {"driver": DRIVER, "parameters": {"draview": "node-test"}}}
                    ],
                }
            }
        },
    }


def test_two_replicas_run_from_the_image_under_restricted(release: Release) -> None:
    k = release.k
    ns = k.get("namespace", release.namespace)
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = release.ready_pods()
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeName"] == NODE
        (container,) = pod["spec"]["containers"]
        assert container["image"] == release.image
        sc = container["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True and sc["runAsNonRoot"] is True
        assert pod["spec"]["securityContext"]["runAsUser"] == 65532
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] and status["restartCount"] == 0, status
        # In-cluster configuration through the projected ServiceAccount token.
        assert any(v.get("projected") for v in pod["spec"]["volumes"]), pod["spec"]["volumes"]
    names = {p["metadata"]["name"] for p in pods}
    assert release.leader() in names


def test_the_drivers_pool_is_judged(release: Release) -> None:
    k = release.k
    states = device_states(k)
    assert len(states) == 4, states
    pools = json.loads(k.check("get", "resourcepoolstatuses", "-o", "json"))["items"]
    (pool,) = [p for p in pools if p["spec"]["driver"] == DRIVER and p["spec"]["pool"] == NODE]
    assert pool["status"]["summary"]["totalDevices"] == 4
    assert pool["status"]["profile"]["kubernetesVersion"].startswith(k.server_release())


def test_a_pod_gets_a_prepared_device_and_draview_follows(
    release: Release, workload_ns: str
) -> None:
    k, device_class = release.k, setting("DRAVIEW_NODE_DEVICE_CLASS")
    k.create(claim_template("one", device_class), namespace=workload_ns)
    pod = restricted_pod("uses-one", release.image, [
        {"name": "dev", "resourceClaimTemplateName": "one"}
    ])  # fmt: skip
    k.create(pod, namespace=workload_ns)
    k.wait_for(
        "the Pod Running",
        lambda: k.get("pod", "uses-one", workload_ns)["status"].get("phase") == "Running",
        timeout=120,
    )
    # The kubelet asked the driver to prepare the device, which put the claim's
    # configuration into the container through CDI.
    k.wait_for(
        "the container's environment",
        lambda: "user_draview=node-test" in k.check("-n", workload_ns, "logs", "uses-one"),
        timeout=30,
    )
    status = k.get("pod", "uses-one", workload_ns)["status"]
    claim = status["resourceClaimStatuses"][0]["resourceClaimName"]
    allocation = k.get("resourceclaim", claim, workload_ns)["status"]["allocation"]
    (result,) = allocation["devices"]["results"]
    assert result["driver"] == DRIVER and result["pool"] == NODE

    def allocated_to_claim() -> bool:
        d = device_states(k).get(result["device"], {})
        return d.get("state") == "Allocated" and any(
            a["claimName"] == claim and a["claimNamespace"] == workload_ns
            for a in d.get("allocations", [])
        )

    k.wait_for("draview to show the device Allocated to the claim", allocated_to_claim, 30)
    k.check("-n", workload_ns, "delete", "pod", "uses-one", "--wait=true", "--timeout=120s")
    k.wait_for(
        "draview to show the device Available again",
        lambda: device_states(k).get(result["device"], {}).get("state") == "Available",
        timeout=60,
    )


EXPLAIN_API = "v1alpha1.explain.draview.io"


def kubectl_dra(k: KubeCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """The plugin as users run it: the API server asked directly, the kubeconfig's
    credentials (no kubectl needed)."""
    env = {key: v for key, v in os.environ.items() if key != "DRAVIEW_KUBECTL"}
    return subprocess.run(
        [sys.executable, "-m", "draview.cli.dra.main", "--kubeconfig", k.kubeconfig, *args],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_a_pod_that_cannot_fit_is_explained(
    release: Release, workload_ns: str, tmp_path: Path
) -> None:
    k, device_class = release.k, setting("DRAVIEW_NODE_DEVICE_CLASS")
    k.create(claim_template("five", device_class, count=5), namespace=workload_ns)
    k.create(
        restricted_pod("wants-five", release.image, [
            {"name": "dev", "resourceClaimTemplateName": "five"}
        ]),
        namespace=workload_ns,
    )  # fmt: skip

    def unschedulable() -> bool:
        conds = k.get("pod", "wants-five", workload_ns)["status"].get("conditions", [])
        return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conds)

    k.wait_for("the scheduler to give up on the Pod", unschedulable, timeout=60)
    claim = k.get("pod", "wants-five", workload_ns)["status"]["resourceClaimStatuses"][0][
        "resourceClaimName"
    ]
    # The leader answers through the API server's aggregation layer (the chart's
    # APIService, the leader's address in its Service's EndpointSlice), as computed.
    k.check("wait", "--for=condition=Available", f"apiservice/{EXPLAIN_API}", "--timeout=60s")
    why = kubectl_dra(k, "-n", workload_ns, "why", claim)
    assert why.returncode == 0, why.stderr
    assert "answered by the draview operator" in why.stderr, why.stderr
    assert "4" in why.stdout and "5" in why.stdout, why.stdout
    asked = kubectl_dra(k, "-n", workload_ns, "why", claim, "-o", "json")
    live = kubectl_dra(k, "-n", workload_ns, "why", claim, "-o", "json", "--live")
    assert asked.returncode == 0 and live.returncode == 0, asked.stderr + live.stderr
    assert json.loads(asked.stdout) == json.loads(live.stdout)
    node = kubectl_dra(k, "describe", "node", NODE)
    assert node.returncode == 0, node.stderr
    assert DRIVER in node.stdout, node.stdout
    pools = kubectl_dra(k, "get", "pools", "--driver", DRIVER, "-o", "json")
    assert pools.returncode == 0, pools.stderr
    (pool,) = json.loads(pools.stdout)["items"]
    assert pool["status"]["summary"]["availableDevices"] == 4, pool["status"]
    # How many more Pods of one device each would fit: the leader answers that too (a
    # FitReview), as computed, and the Pod's template is read from the cluster.
    k.create(claim_template("one-dev", device_class), namespace=workload_ns)
    workload = tmp_path / "more.json"
    more = restricted_pod("more", release.image, [
        {"name": "dev", "resourceClaimTemplateName": "one-dev"}
    ])  # fmt: skip
    workload.write_text(json.dumps(more))
    fit = kubectl_dra(k, "-n", workload_ns, "fit", str(workload), "-o", "json")
    assert fit.returncode == 0, fit.stderr
    assert "answered by the draview operator" in fit.stderr, fit.stderr
    live = kubectl_dra(k, "-n", workload_ns, "fit", str(workload), "-o", "json", "--live")
    assert live.returncode == 0, live.stderr
    assert json.loads(fit.stdout) == json.loads(live.stdout)
    assert json.loads(fit.stdout)["copies"] == 4, fit.stdout


def test_the_service_monitor_selects_the_service(release: Release) -> None:
    out = release.helm(
        "template", release.name, str(REPO_ROOT / "charts" / "draview"),
        "--namespace", release.namespace, "--api-versions", "monitoring.coreos.com/v1",
        # helm template asks no server: tell it the release it would find.
        "--kube-version", json.loads(release.k.check("version", "-o", "json"))[
            "serverVersion"]["gitVersion"],
    ).stdout  # fmt: skip
    docs = [d for d in yaml.safe_load_all(out) if d]
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    # The metrics Service (the explain API's is another, without a selector).
    (service,) = [
        d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == release.name
    ]
    live = release.k.get("service", service["metadata"]["name"], release.namespace)
    wanted = monitor["spec"]["selector"]["matchLabels"]
    assert wanted.items() <= live["metadata"]["labels"].items()
    ports = {p["name"] for p in live["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
