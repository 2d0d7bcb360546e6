"""The release's life after install: `helm upgrade` with a changed flag rolls the Pods,
deleting the leader Pod hands over within the Lease duration with never two writers, a
forgotten image is named where users look, and `helm uninstall` keeps the CRDs and the
status objects (the chart's default). These end the release that e2e/node/test installed.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid

import pytest
from audit import now, writes

from kubecluster import REPO_ROOT, _state_dir
from node import Release

pytestmark = pytest.mark.cluster


def test_helm_upgrade_with_a_changed_flag_rolls_the_pods(release: Release) -> None:
    k = release.k
    deployment = k.get("deployment", release.name, release.namespace)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    # The other log format than the one running: a change whatever the values were.
    wanted = "json" if "--log-format=text" in container["args"] else "text"
    before = {p["metadata"]["name"] for p in release.pods()}
    release.helm(
        "upgrade", release.name, str(REPO_ROOT / "charts" / "draview"),
        "--namespace", release.namespace, "--reuse-values",
        "--set", f"operator.logFormat={wanted}", "--wait", "--timeout", "5m",
    )  # fmt: skip
    k.wait_for(
        "two new Ready replicas",
        lambda: (
            len(release.ready_pods()) == 2
            and not before & {p["metadata"]["name"] for p in release.pods()}
        ),
        timeout=180,
    )
    for pod in release.ready_pods():
        log = k.check("-n", release.namespace, "logs", pod["metadata"]["name"])
        lines = [line for line in log.splitlines() if line.strip()]
        assert lines, "the new replica logged nothing"
        as_json = [line.startswith("{") for line in lines]
        assert all(as_json) if wanted == "json" else not any(as_json), lines[:3]


def test_deleting_the_leader_pod_hands_over_with_one_writer(release: Release) -> None:
    k = release.k
    # After the rollout before it the Lease may be free for a moment: the old leader gave it
    # up on its way out, and a new replica takes it within its retry period.
    leader = k.wait_for("a replica to lead", lambda: release.leader() or None, timeout=30)
    began = now()
    t0 = time.monotonic()
    k.check("-n", release.namespace, "delete", "pod", leader, "--wait=false")
    # The standby replica, or the Pod the ReplicaSet starts in the deleted one's place
    # (it can start and win the released Lease first): either is a hand-over.

    def new_leader() -> str | None:
        holder = release.leader()
        return holder if holder not in ("", leader) else None

    other = k.wait_for("another replica to lead", new_leader, timeout=30)
    handover = time.monotonic() - t0
    assert handover < 15, f"took {handover:.1f} s, more than the Lease duration"
    # The explain API follows the Lease: the Service's endpoint is the new leader.
    k.wait_for(
        "the new leader in the explain API's EndpointSlice",
        lambda: _explain_endpoint(release) == other or None,
        timeout=30,
    )
    # The new leader writes: a new slice gets its status from it.
    tag = uuid.uuid4().hex[:6]
    k.create({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"handover-{tag}"},
        "spec": {"driver": "handover.draview.io", "nodeName": "draview-node",
                 "pool": {"name": f"handover-{tag}", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "d0"}]},
    })  # fmt: skip
    try:
        k.wait_for(
            "the new leader's status of the new slice",
            lambda: k.run("get", "resourceslicestatus", f"handover-{tag}").returncode == 0,
            timeout=30,
        )
    finally:
        k.delete("resourceslice", f"handover-{tag}")
    log = _state_dir() / "logs" / "audit.log"
    old = [w for w in writes(log, f"draview/{leader}") if w.at >= began]
    new = [w for w in writes(log, f"draview/{other}") if w.at >= began]
    assert new, "the new leader wrote nothing"
    if old:
        assert old[-1].at < new[0].began, (old[-1], new[0])


def _explain_endpoint(release: Release) -> str | None:
    """The Pod named in the explain API's EndpointSlice (the leader writes it)."""
    got = release.k.run(
        "get", "endpointslice", f"{release.name}-explain-leader", "-n", release.namespace,
        "-o", "json",
    )  # fmt: skip
    if got.returncode != 0:
        return None
    endpoints = json.loads(got.stdout).get("endpoints") or [{}]
    return str((endpoints[0].get("targetRef") or {}).get("name")) or None


def test_a_forgotten_image_is_named_in_describe(release: Release) -> None:
    k = release.k
    ns = k.create_namespace("draview-noimage")
    try:
        k.check("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
        release.helm(
            "install", "noimage", str(REPO_ROOT / "charts" / "draview"), "--namespace", ns,
            "--set", "crds.install=false", "--set", "image.repository=draview.local/missing",
            "--set", "image.pullPolicy=Never", "--set", "replicaCount=1",
            # One release a cluster serves the explain API (its APIService is cluster-wide).
            "--set", "explainAPI.enabled=false",
        )  # fmt: skip

        def reason() -> str | None:
            pods = json.loads(k.check("-n", ns, "get", "pods", "-o", "json"))["items"]
            for p in pods:
                for s in p.get("status", {}).get("containerStatuses", []):
                    waiting = s.get("state", {}).get("waiting") or {}
                    if waiting.get("reason") == "ErrImageNeverPull":
                        return str(p["metadata"]["name"])
            return None

        pod = k.wait_for("the kubelet to report the missing image", reason, timeout=60)
        described = k.check("-n", ns, "describe", "pod", pod)
        assert "draview.local/missing" in described and "ErrImageNeverPull" in described
    finally:
        release.helm("uninstall", "noimage", "--namespace", ns, check=False)
        k.delete_namespace(ns)


def test_uninstall_keeps_the_crds_and_the_status(release: Release) -> None:
    k = release.k
    before = json.loads(k.check("get", "resourcepoolstatuses", "-o", "json"))["items"]
    assert before
    release.helm("uninstall", release.name, "--namespace", release.namespace, "--wait")
    k.wait_for("the operator's Pods to go", lambda: not release.pods(), timeout=120)
    # The leader took its address out of the explain API's EndpointSlice on its way out;
    # the APIService went with the release.
    assert _explain_endpoint(release) is None
    assert k.run("get", "apiservice", "v1alpha1.explain.draview.io").returncode != 0
    for plural in ("resourceslicestatuses", "resourcepoolstatuses", "capacityprobes"):
        k.get("crd", f"{plural}.draview.io")
    after = json.loads(k.check("get", "resourcepoolstatuses", "-o", "json"))["items"]
    assert {p["metadata"]["name"] for p in after} == {p["metadata"]["name"] for p in before}


def test_forgotten_crds_are_named_in_describe_log_and_readyz(release: Release) -> None:
    """A release installed without the CRDs (crds.install=false, none in the cluster) is
    not Ready and says why where users look; once the CRDs are applied it recovers."""
    k = release.k
    crds = ("crd/resourceslicestatuses.draview.io", "crd/resourcepoolstatuses.draview.io")
    k.check("delete", *crds, "--wait=true", "--timeout=120s")
    ns = k.create_namespace("draview-nocrds")
    try:
        k.check("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
        repository, tag = release.image.rsplit(":", 1)
        release.helm(
            "install", "nocrds", str(REPO_ROOT / "charts" / "draview"), "--namespace", ns,
            "--set", "crds.install=false", "--set", f"image.repository={repository}",
            "--set", "explainAPI.enabled=false",
            "--set", f"image.tag={tag}", "--set", "image.pullPolicy=Never",
            "--set", "replicaCount=1",
        )  # fmt: skip

        def not_ready_event() -> str | None:
            pods = json.loads(k.check("-n", ns, "get", "pods", "-o", "json"))["items"]
            for p in pods:
                described = k.check("-n", ns, "describe", "pod", p["metadata"]["name"])
                if "NotReady" in described and "CRDs are not served" in described:
                    return str(p["metadata"]["name"])
            return None

        pod = k.wait_for("a NotReady Event saying the CRD is missing", not_ready_event, timeout=120)
        assert "CRDs are not served" in k.check("-n", ns, "logs", pod)
        ip = k.get("pod", pod, ns)["status"]["podIP"]
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(f"http://{ip}:8080/readyz", timeout=5)
        assert answer.value.code == 503
        assert "CRDs are not served" in answer.value.read().decode()
        status = k.get("pod", pod, ns)["status"]
        assert status["containerStatuses"][0]["restartCount"] == 0, "no crash loop"

        k.check("apply", "-k", str(REPO_ROOT / "deploy" / "crds"))
        k.wait_for(
            "the Pod Ready once the CRDs are there",
            lambda: any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in k.get("pod", pod, ns)["status"].get("conditions", [])
            ),
            timeout=120,
        )
    finally:
        release.helm("uninstall", "nocrds", "--namespace", ns, check=False)
        k.delete_namespace(ns)
        k.run("apply", "-k", str(REPO_ROOT / "deploy" / "crds"))
