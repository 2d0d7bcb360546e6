"""Least privilege, proven on a real API server: the operator runs with nothing but the
chart's ServiceAccount and RBAC (a token from `kubectl create token`), does its job, and
that identity cannot write what draview only reads."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_proc import Operator
from test_chart import render

from draview.controller.kube import NEEDED
from draview.engine.profile import UNREAD, make_profile
from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
FLOW_KINDS = ("FlowSchema", "PriorityLevelConfiguration")
CLUSTER_SCOPED = ("ClusterRole", "ClusterRoleBinding", *FLOW_KINDS)


def can_i(verb: str, resource: str) -> list[str]:
    """`kubectl auth can-i` arguments for `plural.group` or `plural.group/subresource`:
    the subresource goes in --subresource, since kubectl reads `plural/status` as the
    object named status of the main resource."""
    base, _, sub = resource.partition("/")
    return ["auth", "can-i", verb, base, *([f"--subresource={sub}"] if sub else [])]


class Identity:
    def __init__(self, k: KubeCluster, namespace: str, sa: str, kubeconfig: Path) -> None:
        self.k = k
        self.namespace = namespace
        self.sa = sa
        self.kubeconfig = kubeconfig
        self.user = f"system:serviceaccount:{namespace}:{sa}"
        self.as_sa = KubeCluster(kubeconfig=str(kubeconfig), kubectl=k.kubectl)

    def can(self, verb: str, resource: str, namespace: str | None = None) -> bool:
        args = can_i(verb, resource)
        args += ["-n", namespace] if namespace else ["--all-namespaces"]
        out = self.as_sa.run(*args)
        answer = out.stdout.strip()
        assert answer in ("yes", "no"), out.stderr
        return answer == "yes"


def one_slice(name: str, devices: int = 1, **where: Any) -> dict[str, Any]:
    """A one-slice pool of `devices` devices, placed by `where` (nodeName, allNodes...)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "rbac.draview.io",
            **where,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"dev-{i}"} for i in range(devices)],
        },
    }


def operator_as(ident: Identity, name: str, tmp_path: Path) -> Operator:
    """The operator started with the identity's token, its Lease in the identity's namespace."""
    return Operator(
        str(ident.kubeconfig), ("--lease-namespace", ident.namespace, "--lease-name", name)
    ).start(tmp_path)


def token_kubeconfig(k: KubeCluster, namespace: str, sa: str, path: Path) -> Path:
    """A kubeconfig for the ServiceAccount: the cluster's server and CA, a bound token."""
    raw = json.loads(k.check("config", "view", "--raw", "--minify", "-o", "json"))
    cluster = raw["clusters"][0]["cluster"]
    token = k.check("create", "token", sa, "-n", namespace, "--duration=1h").strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": sa}}],
        "current-context": "sa",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@pytest.fixture
def chart_identity(
    kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path
) -> Iterator[Identity]:
    """The chart's ServiceAccount and RBAC, applied for real into a fresh namespace (the
    release name is unique, so cluster-scoped names do not collide with other runs)."""
    yield from _identity(kube_cluster, kube_namespace, tmp_path)


@pytest.fixture
def identity_without_nodes(
    kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path
) -> Iterator[Identity]:
    """The chart's RBAC as an older chart had it: no rule for Nodes."""
    yield from _identity(kube_cluster, kube_namespace, tmp_path, without="nodes")


@pytest.fixture
def identity_without_metrics(
    kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path
) -> Iterator[Identity]:
    """The chart's RBAC without the rule for the API server's /metrics."""
    yield from _identity(kube_cluster, kube_namespace, tmp_path, without="/metrics")


def _identity(
    k: KubeCluster, namespace: str, tmp_path: Path, without: str | None = None
) -> Iterator[Identity]:
    k.apply_crds()
    release = f"rbac-{uuid.uuid4().hex[:6]}"
    docs = [
        d for d in render(namespace, release=release) if d["kind"] in (*RBAC_KINDS, *FLOW_KINDS)
    ]
    for d in docs:
        if d["kind"] == "ClusterRole" and without:
            d["rules"] = [
                r
                for r in d["rules"]
                if without not in (r.get("resources") or r.get("nonResourceURLs") or ())
            ]
    k.create(*docs)
    sa = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
    try:
        yield Identity(
            k,
            namespace,
            sa,
            token_kubeconfig(k, namespace, sa, tmp_path / "sa.kubeconfig"),
        )
    finally:
        for d in docs:
            if d["kind"] in CLUSTER_SCOPED:
                k.delete(d["kind"].lower(), d["metadata"]["name"])


def test_chart_grants_exactly_what_the_operator_checks_for(chart_identity: Identity) -> None:
    ident = chart_identity
    for verb, group, resource, sub in NEEDED:
        name = f"{resource}.{group}{'/' + sub if sub else ''}"
        assert ident.can(verb, name), f"{ident.user} cannot {verb} {name}"
    for verb in ("get", "create", "update"):
        assert ident.can(verb, "leases.coordination.k8s.io", ident.namespace)
    denied = [
        ("create", "resourceslices.resource.k8s.io", None),
        ("patch", "resourceslices.resource.k8s.io", None),
        ("update", "resourceslices.resource.k8s.io", None),
        ("delete", "resourceslices.resource.k8s.io", None),
        ("patch", "resourceclaims.resource.k8s.io", None),
        ("patch", "resourceclaims.resource.k8s.io/status", None),
        ("delete", "resourceclaims.resource.k8s.io", None),
        ("patch", "devicetaintrules.resource.k8s.io", None),
        ("update", "resourceslicestatuses.draview.io", None),
        ("get", "secrets", None),
        ("list", "pods", None),
        ("create", "pods", None),
        ("update", "leases.coordination.k8s.io", "kube-system"),
        ("delete", "leases.coordination.k8s.io", ident.namespace),
        ("create", "customresourcedefinitions.apiextensions.k8s.io", None),
    ]
    for verb, resource, ns in denied:
        assert not ident.can(verb, resource, ns), f"{ident.user} may {verb} {resource}"


def test_operator_does_its_job_with_only_the_chart_rbac(
    chart_identity: Identity, tmp_path: Path
) -> None:
    ident, k = chart_identity, chart_identity.k
    name = f"rbac-{uuid.uuid4().hex[:6]}"
    driver = "rbac.draview.io"
    rslice = one_slice(name, 3, nodeName="node-1")
    op = operator_as(ident, name, tmp_path)
    try:
        op.wait_ready(timeout=90)
        assert "missing permissions" not in op.logs(), op.logs()
        k.create(rslice)

        def written() -> bool:
            out = k.run("get", "resourceslicestatus", name, "-o", "json")
            if out.returncode != 0:
                return False
            summary = json.loads(out.stdout).get("status", {}).get("summary", {})
            return summary.get("totalDevices") == 3 and summary.get("availableDevices") == 3

        k.wait_for(f"ResourceSliceStatus {name}", written, timeout=60)
        pools = json.loads(k.check("get", "resourcepoolstatuses", "-o", "json"))["items"]
        mine = [p for p in pools if p["spec"]["driver"] == driver and p["spec"]["pool"] == name]
        assert mine, pools
        # The chart lets the operator read the cluster's own gates from /metrics.
        profile = mine[0]["status"]["profile"]
        assert profile["source"] == "cluster", profile
        assert profile["kubernetesVersion"] == k.server_release(), profile
        assert op.metric("draview_profile_info", gates="cluster") == 1
        lease = k.get("lease", name, namespace=ident.namespace)
        assert lease["spec"]["holderIdentity"], lease
        assert op.metric("draview_leader") == 1
        assert op.metric("dra_resourceslice_status_update_errors_total") == 0, op.logs()

        # The same identity must not write what draview only reads.
        patch = ident.as_sa.run(
            "patch",
            "resourceslice",
            name,
            "--type=merge",
            "-p",
            '{"metadata":{"labels":{"draview-test":"forbidden"}}}',
        )
        assert patch.returncode != 0
        assert "forbidden" in patch.stderr.lower(), patch.stderr
        delete = ident.as_sa.run("delete", "resourceslice", name)
        assert delete.returncode != 0 and "forbidden" in delete.stderr.lower()
        assert "draview-test" not in (k.get("resourceslice", name)["metadata"].get("labels") or {})
    finally:
        k.delete("resourceslice", name)
        assert op.stop() == 0, op.logs()


def test_aggregated_roles_split_pools_from_slices(
    chart_identity: Identity,
) -> None:
    """Pools (no claim names) go to view; slices (claim names) only to admin."""
    k, ns = chart_identity.k, chart_identity.namespace
    bindings: list[str] = []
    try:
        check_roles(k, ns, bindings)
    finally:
        for binding in bindings:
            k.delete("clusterrolebinding", binding)


def check_roles(k: KubeCluster, ns: str, bindings: list[str]) -> None:
    for role in ("view", "admin"):
        user = f"system:serviceaccount:{ns}:{role}-user"
        binding = f"{ns}-{role}"
        k.check(
            "create",
            "clusterrolebinding",
            binding,
            f"--clusterrole={role}",
            f"--serviceaccount={ns}:{role}-user",
        )
        bindings.append(binding)

        def can(verb: str, resource: str, user: str = user) -> bool:
            return k.run(*can_i(verb, resource), f"--as={user}").stdout.strip() == "yes"

        if role == "view":
            # The clusterrole-aggregation controller fills in view within moments.
            k.wait_for(
                "view aggregates resourcepoolstatuses",
                lambda can=can: can("list", "resourcepoolstatuses.draview.io"),
            )
            assert not can("list", "resourceslicestatuses.draview.io")
            assert not can("patch", "resourcepoolstatuses.draview.io")
        else:
            k.wait_for(
                "admin aggregates resourceslicestatuses",
                lambda can=can: can("list", "resourceslicestatuses.draview.io"),
            )
            assert can("get", "resourcepoolstatuses.draview.io")
            assert not can("patch", "resourceslicestatuses.draview.io/status")
            assert not can("update", "resourceslicestatuses.draview.io/status")


def test_without_node_rbac_the_operator_judges_from_assumed_nodes(
    identity_without_nodes: Identity, tmp_path: Path
) -> None:
    """An older chart's RBAC cannot watch Nodes: the operator says so once, exports
    draview_nodes_watched 0, and judges pools that select nodes as `analyze` does
    without Nodes, instead of failing its list forever."""
    ident, k = identity_without_nodes, identity_without_nodes.k
    assert not ident.can("list", "nodes")
    name = f"rbac-{uuid.uuid4().hex[:6]}"
    rslice = one_slice(name, allNodes=True)
    op = operator_as(ident, name, tmp_path)
    try:
        op.wait_ready(timeout=90)
        assert "cannot watch Nodes" in op.logs(), op.logs()
        assert op.metric("draview_nodes_watched") == 0
        k.create(rslice)

        def available() -> bool:
            out = k.run("get", "resourceslicestatus", name, "-o", "json")
            if out.returncode != 0:
                return False
            devices = json.loads(out.stdout).get("status", {}).get("devices", [])
            return [d["state"] for d in devices] == ["Available"]

        k.wait_for(f"ResourceSliceStatus {name}", available, timeout=60)
        assert op.metric("dra_resourceslice_status_update_errors_total") == 0, op.logs()
    finally:
        k.delete("resourceslice", name)
        assert op.stop() == 0, op.logs()


def test_status_writes_get_their_own_priority_level(chart_identity: Identity) -> None:
    """The chart's FlowSchema classifies the operator's writes into draview's priority
    level on the real API server (API Priority and Fairness names the schema it chose in
    every response), so a first sync queues there instead of taking the scheduler's
    seats; its reads stay with the built-in schemas."""
    ident, k = chart_identity, chart_identity.k
    schemas = json.loads(k.check("get", "flowschemas", "-o", "json"))["items"]
    ours = next(
        fs
        for fs in schemas
        if fs["spec"]["rules"][0]["subjects"][0].get("serviceAccount", {}).get("name") == ident.sa
        and fs["spec"]["rules"][0]["subjects"][0]["serviceAccount"]["namespace"] == ident.namespace
    )
    level = ours["spec"]["priorityLevelConfiguration"]["name"]
    assert k.get("prioritylevelconfiguration", level)["spec"]["type"] == "Limited"
    name = f"apf-{uuid.uuid4().hex[:6]}"
    pool = {
        "apiVersion": "draview.io/v1alpha1",
        "kind": "ResourcePoolStatus",
        "metadata": {"name": name},
        "spec": {"driver": "apf.draview.io", "pool": name},
    }
    try:
        write = ident.as_sa.run("create", "-f", "-", "-v=8", input=json.dumps(pool))
        assert write.returncode == 0, write.stderr
        read = ident.as_sa.run("get", "resourcepoolstatus", name, "-v=8")
        assert read.returncode == 0, read.stderr
    finally:
        k.run("delete", "resourcepoolstatus", name, "--ignore-not-found")
    assert _flow_schema_uid(write.stderr, "POST") == ours["metadata"]["uid"]
    assert _flow_schema_uid(read.stderr, "GET") not in (None, ours["metadata"]["uid"])


def _flow_schema_uid(verbose: str, verb: str) -> str | None:
    """The X-Kubernetes-Pf-Flowschema-Uid response header of the `verb` request to
    resourcepoolstatuses in kubectl -v=8 output (discovery requests come first)."""
    current = ""
    for line in verbose.splitlines():
        if '"Request" verb=' in line:
            current = line
        _, sep, rest = line.partition("X-Kubernetes-Pf-Flowschema-Uid:")
        if sep and f'verb="{verb}"' in current and "resourcepoolstatuses" in current:
            return rest.strip()
    return None


def test_without_the_metrics_rule_the_release_defaults_are_used_and_said(
    identity_without_metrics: Identity, tmp_path: Path
) -> None:
    """Forbidden /metrics: one warning line, the metric and every pool's status.profile
    say that the release's default gates were assumed; the operator works on."""
    ident, k = identity_without_metrics, identity_without_metrics.k
    assert ident.as_sa.run("get", "--raw", "/metrics").returncode != 0
    name = f"rbac-{uuid.uuid4().hex[:6]}"
    rslice = one_slice(name, nodeName="node-1")
    op = operator_as(ident, name, tmp_path)
    try:
        op.wait_ready(timeout=90)
        logs = op.logs()
        assert logs.count("cannot read the API server's feature gates") == 1, logs
        assert op.metric("draview_profile_info", gates=UNREAD) == 1
        k.create(rslice)

        def judged() -> dict[str, Any] | None:
            out = k.run("get", "resourcepoolstatuses", "-o", "json")
            for p in json.loads(out.stdout).get("items", []) if out.returncode == 0 else []:
                if p["spec"]["pool"] == name and "profile" in p.get("status", {}):
                    return dict(p["status"]["profile"])
            return None

        k.wait_for(f"ResourcePoolStatus of {name}", lambda: judged() is not None, timeout=60)
        profile = judged()
        assert profile is not None and profile["source"] == UNREAD
        assert (
            profile["featureGates"] == make_profile(k.server_release()).as_status()["featureGates"]
        )
    finally:
        k.delete("resourceslice", name)
        assert op.stop() == 0, op.logs()
