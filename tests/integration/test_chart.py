"""The Helm chart (charts/draview) and the plain manifests rendered from it (deploy/).

helm comes from ``e2e/deploy-checks.sh --print-helm`` (built once from its Go module and
cached in ~/.cache/draview-tools), or from ``$DRAVIEW_HELM``. The server-side dry runs go
to the real API server of the local control plane (or ``$KUBECONFIG``).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubecluster import KubeCluster

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "draview"
KUBE_VERSION = "v1.36.0"
MONITORING = "monitoring.coreos.com/v1"


@cache
def helm_binary() -> str:
    if os.environ.get("DRAVIEW_HELM"):
        return os.environ["DRAVIEW_HELM"]
    out = subprocess.run(
        [str(ROOT / "e2e" / "deploy-checks.sh"), "--print-helm"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        pytest.fail(f"cannot get helm:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([helm_binary(), *args], capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed:\n{out.stderr}")
    return out


def render_text(
    namespace: str = "draview",
    *sets: str,
    release: str = "draview",
    api_versions: Iterable[str] = (),
) -> str:
    args = ["template", release, str(CHART), "-n", namespace, "--kube-version", KUBE_VERSION]
    for api in api_versions:
        args += ["--api-versions", api]
    for s in sets:
        args += ["--set", s]
    return helm(*args).stdout


def render(
    namespace: str = "draview",
    *sets: str,
    release: str = "draview",
    api_versions: Iterable[str] = (),
) -> list[dict[str, Any]]:
    text = render_text(namespace, *sets, release=release, api_versions=api_versions)
    return [d for d in yaml.safe_load_all(text) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def metrics_service(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The Service of /metrics (the explain API's is the other one)."""
    (svc,) = [d for d in by_kind(docs, "Service") if d["metadata"]["name"] == "draview"]
    return svc


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    c: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return c


# -- rendering (no cluster) -------------------------------------------------------------


def test_crd_copies_are_deploy_crds_byte_for_byte() -> None:
    sources = sorted(p.name for p in (ROOT / "deploy" / "crds").glob("*.yaml"))
    sources.remove("kustomization.yaml")
    copies = sorted(p.name for p in (CHART / "files" / "crds").glob("*.yaml"))
    assert copies == sources, "fix: e2e/deploy-checks.sh --update"
    for name in sources:
        src = (ROOT / "deploy" / "crds" / name).read_bytes()
        assert (CHART / "files" / "crds" / name).read_bytes() == src, (
            f"{name} differs; fix: e2e/deploy-checks.sh --update"
        )


def test_rendered_crds_are_the_sources_plus_keep_and_labels() -> None:
    docs = render()
    crds = {d["metadata"]["name"]: d for d in by_kind(docs, "CustomResourceDefinition")}
    for path in (ROOT / "deploy" / "crds").glob("draview.io_*.yaml"):
        src = yaml.safe_load(path.read_text())
        got = copy.deepcopy(crds.pop(src["metadata"]["name"]))
        assert got["metadata"].pop("annotations") == {"helm.sh/resource-policy": "keep"}
        assert got["metadata"].pop("labels")["app.kubernetes.io/part-of"] == "draview"
        assert got == src
    assert not crds
    no_keep = render("draview", "crds.keep=false")
    for crd in by_kind(no_keep, "CustomResourceDefinition"):
        assert "helm.sh/resource-policy" not in crd["metadata"].get("annotations", {})
    assert not by_kind(render("draview", "crds.install=false"), "CustomResourceDefinition")


def test_deploy_manifests_are_the_rendered_chart() -> None:
    text = render_text("draview", "crds.install=false", "explainAPI.enabled=false")
    current = (ROOT / "deploy" / "manifests" / "draview.yaml").read_text()
    body = "".join(line + "\n" for line in current.splitlines() if not line.startswith("# "))
    rendered = "".join(line + "\n" for line in text.splitlines() if not line.startswith("# "))
    assert body == rendered, "deploy/manifests is stale; fix: e2e/deploy-checks.sh --update"


def test_deployment_defaults_are_restricted_and_leader_elected() -> None:
    docs = render()
    dep = one(docs, "Deployment")
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    c = container(docs)
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert isinstance(sc["runAsUser"], int) and sc["runAsUser"] > 0
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"name": "http", "containerPort": 8080, "protocol": "TCP"} in c["ports"]
    assert "--leader-elect=true" in c["args"]
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    svc = metrics_service(docs)
    assert svc["spec"]["ports"][0]["name"] == "http-metrics"
    assert one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


def test_operator_flags_come_from_values() -> None:
    docs = render(
        "draview",
        "operator.batchInterval=0.5",
        "operator.qps=7",
        "operator.burst=9",
        "operator.resyncInterval=60",
        "operator.logLevel=debug",
        "operator.partitionAttributes={gpu.example.com/profile,tpu.example.com/slice}",
    )
    args = container(docs)["args"]
    for flag in (
        "--batch-interval=0.5",
        "--qps=7",
        "--burst=9",
        "--resync-interval=60",
        "--log-level=debug",
        "--partition-attribute=gpu.example.com/profile",
        "--partition-attribute=tpu.example.com/slice",
    ):
        assert flag in args
    # Every flag the chart passes is one `draview run` knows.
    out = subprocess.run(
        ["draview", "run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for arg in args:
        assert arg.split("=", 1)[0] in out, arg


def test_values_schema_rejects_typos_and_bad_values() -> None:
    for bad in ("operator.qsp=1", "operator.logLevel=loud", "image.pullPolicy=Sometimes"):
        out = helm(
            "template", "x", str(CHART), "--kube-version", KUBE_VERSION, "--set", bad, check=False
        )
        assert out.returncode != 0, bad
        assert "schema" in out.stderr.lower(), out.stderr


def test_monitoring_objects_need_the_prometheus_operator_api() -> None:
    plain = render()
    assert not by_kind(plain, "ServiceMonitor") and not by_kind(plain, "PrometheusRule")
    docs = render(
        "draview", "monitoring.serviceMonitor.labels.release=kps", api_versions=[MONITORING]
    )
    sm = one(docs, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "kps"
    assert sm["spec"]["endpoints"][0]["port"] == "http-metrics"
    assert sm["spec"]["selector"]["matchLabels"] == metrics_service(docs)["spec"]["selector"]
    rule = one(docs, "PrometheusRule")
    assert rule["spec"] == yaml.safe_load((CHART / "files" / "rules.yaml").read_text())
    off = render(
        "draview",
        "monitoring.serviceMonitor.enabled=false",
        "monitoring.prometheusRule.enabled=false",
        api_versions=[MONITORING],
    )
    assert not by_kind(off, "ServiceMonitor") and not by_kind(off, "PrometheusRule")


def test_dashboard_configmap_label_is_configurable() -> None:
    cm = one(render(), "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(cm["data"]["draview.json"])
    assert dashboard == json.loads((CHART / "files" / "dashboards" / "draview.json").read_text())
    cm = one(
        render("draview", "monitoring.dashboards.label=dash", "monitoring.dashboards.labelValue=x"),
        "ConfigMap",
    )
    assert cm["metadata"]["labels"]["dash"] == "x"
    assert "grafana_dashboard" not in cm["metadata"]["labels"]


def test_rbac_is_least_privilege() -> None:
    docs = render()
    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "ClusterRole")}
    rules = roles["draview"]["rules"]
    granted = {
        (group, resource, verb)
        for rule in rules
        if "nonResourceURLs" not in rule
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    # The API server's release and feature gates, read once at startup; nothing else.
    urls = [r for r in rules if "nonResourceURLs" in r]
    assert urls == [{"nonResourceURLs": ["/metrics", "/version"], "verbs": ["get"]}]
    dra = ("resourceslices", "resourceclaims", "devicetaintrules", "deviceclasses")
    own = ("resourceslicestatuses", "resourcepoolstatuses")
    expected = {("resource.k8s.io", r, v) for r in dra for v in ("get", "list", "watch")}
    expected |= {
        ("draview.io", r, v)
        for r in own
        for v in ("get", "list", "watch", "create", "patch", "delete")
    }
    # update: a new object's first status (a PUT at the version its create returned)
    expected |= {("draview.io", f"{r}/status", v) for r in own for v in ("patch", "update")}
    expected |= {(g, "events", v) for g in ("", "events.k8s.io") for v in ("create", "patch")}
    expected |= {("authorization.k8s.io", "selfsubjectaccessreviews", "create")}
    # Node names and labels (a metadata-only watch) decide which slices reach a node.
    expected |= {("", "nodes", v) for v in ("get", "list", "watch")}
    # Capacity probes: their objects, and the templates a probe may name.
    expected |= {
        ("draview.io", "capacityprobes", v) for v in ("get", "list", "create", "patch", "delete")
    }
    expected |= {("draview.io", "capacityprobes/status", v) for v in ("patch", "update")}
    expected |= {("resource.k8s.io", "resourceclaimtemplates", "get")}
    assert granted == expected
    namespaced = {r["metadata"]["name"]: r for r in by_kind(docs, "Role")}
    assert set(namespaced) == {"draview-leader", "draview-probes", "draview-explain-endpoint"}
    # The explain API: its Service's EndpointSlice, and reading that Service's uid only.
    assert namespaced["draview-explain-endpoint"]["rules"] == [
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "create", "update", "delete"],
        },
        {
            "apiGroups": [""],
            "resources": ["services"],
            "resourceNames": ["draview-explain"],
            "verbs": ["get"],
        },
    ]
    bound = {b["roleRef"]["name"]: b for b in by_kind(docs, "RoleBinding")}
    reader = bound["extension-apiserver-authentication-reader"]
    assert reader["metadata"]["namespace"] == "kube-system"
    delegators = [
        b
        for b in by_kind(docs, "ClusterRoleBinding")
        if b["roleRef"]["name"] == "system:auth-delegator"
    ]
    assert len(delegators) == 1
    explain = roles["draview-explain"]
    assert explain["rules"] == [
        {"apiGroups": ["explain.draview.io"], "resources": ["claimexplanations"], "verbs": ["get"]},
        {"apiGroups": ["explain.draview.io"], "resources": ["fitreviews"], "verbs": ["create"]},
    ]
    assert explain["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert "rbac.authorization.k8s.io/aggregate-to-view" not in explain["metadata"]["labels"]
    assert all(r["metadata"]["namespace"] == "draview" for r in namespaced.values())
    # The probe definitions: ConfigMaps of the release namespace, listed, never written.
    assert namespaced["draview-probes"]["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}
    ]
    lease = namespaced["draview-leader"]
    assert lease["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]
    view = roles["draview-pools-view"]
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert view["rules"][0]["resources"] == ["resourcepoolstatuses", "capacityprobes"]
    admin = roles["draview-slices-view"]
    labels = admin["metadata"]["labels"]
    assert labels["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    assert "rbac.authorization.k8s.io/aggregate-to-view" not in labels
    assert "rbac.authorization.k8s.io/aggregate-to-edit" not in labels


def test_the_explain_api_is_registered_with_a_certificate_it_trusts() -> None:
    docs = render()
    api = one(docs, "APIService")
    assert api["metadata"]["name"] == "v1alpha1.explain.draview.io"
    assert api["spec"]["service"] == {
        "namespace": "draview",
        "name": "draview-explain",
        "port": 443,
    }
    assert "insecureSkipTLSVerify" not in api["spec"]
    secret = one(docs, "Secret")
    assert api["spec"]["caBundle"] == secret["data"]["ca.crt"]
    # The serving certificate is for the name the API server checks: <service>.<ns>.svc.
    pem = base64.b64decode(secret["data"]["tls.crt"])
    names = subprocess.run(
        ["openssl", "x509", "-noout", "-ext", "subjectAltName"],
        input=pem, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    assert "DNS:draview-explain.draview.svc" in names, names
    (svc,) = [d for d in by_kind(docs, "Service") if d["metadata"]["name"] == "draview-explain"]
    assert "selector" not in svc["spec"], "the leader writes the endpoint"
    c = container(docs)
    for arg in ("--explain-port=8443", "--explain-service=draview-explain"):
        assert arg in c["args"]
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    mount = {m["name"]: m for m in c["volumeMounts"]}["explain-tls"]
    assert mount["readOnly"] is True and mount["mountPath"] == "/etc/draview/explain"
    # Off: nothing of it, and the operator runs without the port.
    off = render("draview", "explainAPI.enabled=false")
    assert not by_kind(off, "APIService") and not by_kind(off, "Secret")
    assert not any(a.startswith("--explain") for a in container(off)["args"])
    # A certificate of one's own: the Secret named, the CA given, nothing generated.
    own = render("draview", "explainAPI.tls.secretName=mine", "explainAPI.tls.caBundle=Q0E=")
    assert not by_kind(own, "Secret") and one(own, "APIService")["spec"]["caBundle"] == "Q0E="
    vols = {v["name"]: v for v in one(own, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert vols["explain-tls"]["secret"]["secretName"] == "mine"
    missing = helm(
        "template", "x", str(CHART), "--kube-version", KUBE_VERSION,
        "--set", "explainAPI.tls.secretName=mine", check=False,
    )  # fmt: skip
    assert missing.returncode != 0 and "explainAPI.tls.caBundle is required" in missing.stderr


@pytest.mark.cluster
def test_notes_tell_the_next_command(
    kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    out = subprocess.run(
        [
            helm_binary(),
            "install",
            f"notes-{kube_namespace[-8:]}",
            str(CHART),
            "-n",
            kube_namespace,
            "--dry-run=server",
            # CRDs applied by other tests with kubectl are not Helm's to adopt.
            "--set",
            "crds.install=false",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "KUBECONFIG": kube_cluster.kubeconfig, "HOME": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    notes = out.stdout.split("NOTES:", 1)[1]
    assert "kubectl get rpst" in notes and "kubectl dra get pools" in notes
    assert "No monitoring.coreos.com/v1 API" in notes


def test_helm_lint() -> None:
    out = helm("lint", "--strict", "--kube-version", KUBE_VERSION, str(CHART), check=False)
    assert out.returncode == 0, out.stdout + out.stderr


# -- against the API server -------------------------------------------------------------


def retarget(docs: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """The deploy/ objects moved from namespace draview to `namespace` (tests share a
    cluster: they must not create namespace draview)."""
    out = []
    for d in copy.deepcopy(docs):
        if d["kind"] == "Namespace":
            continue
        if d["metadata"].get("namespace") == "draview":
            d["metadata"]["namespace"] = namespace
        for subject in d.get("subjects", []):
            if subject.get("namespace") == "draview":
                subject["namespace"] = namespace
        out.append(d)
    return out


def server_dry_run(k: KubeCluster, docs: list[dict[str, Any]]) -> str:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    out = k.run("apply", "--dry-run=server", "-f", "-", input=body)
    assert out.returncode == 0, out.stderr
    assert "would violate PodSecurity" not in out.stderr, out.stderr
    return out.stdout


def restrict(k: KubeCluster, namespace: str) -> None:
    k.check(
        "label",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/warn=restricted",
    )


@pytest.mark.cluster
def test_rendered_chart_applies_with_server_dry_run(
    kube_cluster: KubeCluster, kube_namespace: str
) -> None:
    restrict(kube_cluster, kube_namespace)
    release = f"dry-{kube_namespace[-8:]}"
    for api_versions in ((), (MONITORING,)):
        docs = render(kube_namespace, release=release, api_versions=api_versions)
        if api_versions:
            # The local control plane has no Prometheus Operator CRDs.
            docs = [d for d in docs if not d["apiVersion"].startswith("monitoring.coreos.com/")]
        out = server_dry_run(kube_cluster, docs)
        assert "deployment.apps/" in out and "(server dry run)" in out


@pytest.mark.cluster
def test_kustomize_deploy_applies_with_server_dry_run(
    kube_cluster: KubeCluster, kube_namespace: str
) -> None:
    restrict(kube_cluster, kube_namespace)
    text = kube_cluster.check("kustomize", str(ROOT / "deploy"))
    docs = [d for d in yaml.safe_load_all(text) if d]
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "CustomResourceDefinition", "Deployment", "ClusterRole"} <= kinds
    namespace = one(docs, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    server_dry_run(kube_cluster, retarget(docs, kube_namespace))


@pytest.mark.cluster
def test_pod_template_is_admitted_under_restricted_pod_security(
    kube_cluster: KubeCluster, kube_namespace: str
) -> None:
    restrict(kube_cluster, kube_namespace)
    dep = one(render(kube_namespace), "Deployment")
    spec = copy.deepcopy(dep["spec"]["template"]["spec"])
    spec["serviceAccountName"] = "default"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "draview-psa", "namespace": kube_namespace},
        "spec": spec,
    }
    out = kube_cluster.run("create", "--dry-run=server", "-f", "-", input=json.dumps(pod))
    assert out.returncode == 0, out.stderr
