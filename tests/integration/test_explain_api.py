"""The explain API: `kubectl dra why` of a pending claim, and `kubectl dra fit`, answered by
the running operator through the API server's aggregation layer, with the caller's
identity.

The local control plane runs with a front-proxy CA as kubeadm sets it up. The operator
runs here with --explain-port; an APIService for explain.draview.io points at it through
an ExternalName Service (there are no Pods here; tests/node installs the chart, whose
Service the leader's EndpointSlice fills). Each answer is compared with the one the
plugin computes itself (--live).
"""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_helpers import DRIVER, allocate, claim, rslice, uniq, wait_states
from operator_proc import Operator, free_port
from test_kubectl_dra import dra

from explain_local import APISERVICE, registration, renew, serving_cert
from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster
PATH = "/apis/explain.draview.io/v1alpha1/namespaces/{ns}/claimexplanations/{name}"
FIT_PATH = "/apis/explain.draview.io/v1alpha1/namespaces/{ns}/fitreviews"


@pytest.fixture(scope="module")
def explain(
    crds: KubeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The operator serving the explain API, registered with the API server, and writing
    the EndpointSlice of a Service of its own for an address no one dials."""
    ns = crds.create_namespace("draview-explain")
    certs = tmp_path_factory.mktemp("explain-certs")
    ca = serving_cert(certs, ns)
    port = free_port()
    args = f"--leader-elect false --lease-namespace {ns} --explain-port {port}"
    args += f" --explain-cert-dir {certs} --explain-service draview-leader-test"
    args += " --pod-ip 10.243.7.7"
    op = Operator(crds.kubeconfig, tuple(args.split())).start(tmp_path_factory.mktemp("op"))
    leader_service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "draview-leader-test", "namespace": ns},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
    }
    crds.apply(leader_service, *registration(ns, port, ca))
    try:
        op.wait_ready()
        crds.check("wait", "--for=condition=Available", f"apiservice/{APISERVICE}", "--timeout=60s")
        yield {"operator": op, "namespace": ns, "port": port, "certs": certs}
    finally:
        # A registered API whose server is gone makes discovery fail for everyone after.
        crds.run("delete", "apiservice", APISERVICE, "--ignore-not-found")
        code = op.stop()
        crds.delete_namespace(ns)
        assert code == 0, op.logs()


@pytest.fixture
def pending(explain: dict[str, Any], crds: KubeCluster) -> Iterator[dict[str, str]]:
    """A pool of two devices on node-1, one held by a claim, and a claim that wants three."""
    ns = explain["namespace"]
    crds.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "test-class"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
    pool = uniq("explain")
    crds.create(rslice(f"{pool}-s", pool, [{"name": "gpu-0"}, {"name": "gpu-1"}]))
    try:
        allocate(crds, ns, "held", pool, "gpu-1")
        wait_states(crds, f"{pool}-s", {"gpu-0": ("Available", None), "gpu-1": ("Allocated", None)})
        crds.create(claim("wants-three", 3), namespace=ns)
        yield {"namespace": ns, "pool": pool}
    finally:
        crds.run("delete", "resourceclaim", "held", "wants-three", "-n", ns, "--ignore-not-found")
        crds.delete("resourceslice", f"{pool}-s")


def test_why_of_a_pending_claim_is_the_operators_answer_and_the_same(
    crds: KubeCluster, pending: dict[str, str]
) -> None:
    ns = pending["namespace"]
    asked = dra(crds, "why", "wants-three", "-n", ns, "-o", "json")
    assert asked.returncode == 0, asked.stderr
    assert "answered by the draview operator" in asked.stderr, asked.stderr
    live = dra(crds, "why", "wants-three", "-n", ns, "-o", "json", "--live")
    assert live.returncode == 0, live.stderr
    assert "answered by" not in live.stderr
    assert json.loads(asked.stdout) == json.loads(live.stdout)
    # The text names the claim that holds gpu-1, from the status the operator sent.
    text = dra(crds, "why", "wants-three", "-n", ns)
    assert text.stdout == dra(crds, "why", "wants-three", "-n", ns, "--live").stdout
    assert f"allocated to {ns}/held" in text.stdout, text.stdout
    # An allocated claim is judged by the plugin on its own pools, as before.
    held = dra(crds, "why", "held", "-n", ns, "-o", "json")
    assert held.returncode == 0 and "answered by" not in held.stderr, held.stderr


def test_the_operator_answers_only_whom_the_api_server_names_and_allows(
    crds: KubeCluster, pending: dict[str, str], explain: dict[str, Any]
) -> None:
    ns = pending["namespace"]
    path = PATH.format(ns=ns, name="wants-three")
    doc = json.loads(crds.check("get", "--raw", path))
    assert doc["kind"] == "ClaimExplanation" and doc["answeredBy"]["pools"] >= 1, doc
    # RBAC at the API server: a user with no grant at all never reaches the operator.
    nobody = crds.run("get", "--raw", path, "--as=nobody")
    assert nobody.returncode != 0 and "forbidden" in nobody.stderr.lower(), nobody.stderr
    # A user who may get explanations and the claim but not list slices: the operator's
    # SubjectAccessReview refuses, naming what is missing.
    user = "explain-reader"
    _grant(
        crds,
        ns,
        user,
        _rule("explain.draview.io", "claimexplanations"),
        _rule("resource.k8s.io", "resourceclaims"),
    )
    refused = crds.run("get", "--raw", path, f"--as={user}")
    assert refused.returncode != 0, refused.stdout
    assert 'cannot list resource "resourceslices"' in refused.stderr, refused.stderr
    # A claim the operator holds no pending model of: 404 with a reason.
    gone = crds.run("get", "--raw", PATH.format(ns=ns, name="held"))
    assert gone.returncode != 0 and "draview holds no pending resourceclaim" in gone.stderr


@pytest.fixture
def workload(pending: dict[str, str], crds: KubeCluster, tmp_path: Path) -> Path:
    """A Deployment whose Pods each take one device of test-class through a template the
    cluster holds (the plugin reads it and sends it along)."""
    ns = pending["namespace"]
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-test", "namespace": ns},
        "spec": {"spec": claim("x", 1)["spec"]},
    }
    crds.apply(template)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": ns},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {
                    "containers": [{"name": "main", "image": "x"}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-test"}],
                },
            },
        },
    }
    path = tmp_path / "trainer.yaml"
    path.write_text(json.dumps(deployment))
    return path


def test_fit_of_a_workload_is_the_operators_answer_and_the_same(
    crds: KubeCluster, pending: dict[str, str], workload: Path
) -> None:
    ns = pending["namespace"]
    asked = dra(crds, "fit", str(workload), "-n", ns, "-o", "json")
    assert asked.returncode == 0, asked.stderr
    assert "answered by the draview operator" in asked.stderr, asked.stderr
    live = dra(crds, "fit", str(workload), "-n", ns, "-o", "json", "--live")
    assert live.returncode == 0, live.stderr
    assert "answered by" not in live.stderr
    doc = json.loads(asked.stdout)
    assert doc == json.loads(live.stdout)
    # gpu-0 of the fixture's pool is free: at least that copy fits, on node-1.
    assert doc["copies"] >= 1 and {"name": "node-1", "copies": 1} in [
        {"name": n["name"], "copies": n["copies"]} for n in doc["nodes"]
    ], doc
    text = dra(crds, "fit", str(workload), "-n", ns, "-o", "wide")
    assert text.returncode == 0 and "answered by the draview operator" in text.stderr
    assert text.stdout == dra(crds, "fit", str(workload), "-n", ns, "-o", "wide", "--live").stdout
    # A budget above what the operator spends: the plugin computes the answer itself.
    big = dra(crds, "fit", str(workload), "-n", ns, "-o", "json", "--budget", "200000")
    assert big.returncode == 0, big.stderr
    assert "above the 100,000 node searches the draview operator" in big.stderr, big.stderr
    assert json.loads(big.stdout)["copies"] == doc["copies"]
    # A class that does not exist: the operator says so, as one line and exit 2.
    unknown = json.loads(workload.read_text())
    unknown["spec"]["template"]["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimTemplateName": "no-class"}
    ]
    crds.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "no-class", "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "r", "exactly": {"deviceClassName": "no-such-class"}}
            ]}}},
        }
    )  # fmt: skip
    bad = workload.with_name("unknown.yaml")
    bad.write_text(json.dumps(unknown))
    refused = dra(crds, "fit", str(bad), "-n", ns)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("\n") == 1 and "no-such-class" in refused.stderr, refused.stderr
    # Asked as another release than the operator judges as: computed here, for that one.
    other = "1.35" if crds.server_release() != "1.35" else "1.36"
    flags = ("fit", str(workload), "-n", ns, "-o", "json", "--kubernetes-version", other)
    mine = dra(crds, *flags)
    assert mine.returncode == 0, mine.stderr
    assert "did not answer (the draview operator judges as Kubernetes" in mine.stderr
    assert f"not Kubernetes {other}" in mine.stderr, mine.stderr
    assert json.loads(mine.stdout)["profile"].startswith(f"Kubernetes {other}")


def test_the_operator_answers_a_fit_review_only_to_whom_could_compute_it(
    crds: KubeCluster, pending: dict[str, str], workload: Path, tmp_path: Path
) -> None:
    ns = pending["namespace"]
    review = tmp_path / "review.json"
    template = json.loads(
        crds.check("get", "resourceclaimtemplate", "one-test", "-n", ns, "-o", "json")
    )
    objects = [json.loads(workload.read_text()), template]
    body = {"apiVersion": "explain.draview.io/v1alpha1", "kind": "FitReview"}
    review.write_text(json.dumps({**body, "spec": {"objects": objects, "budget": 100}}))
    path = FIT_PATH.format(ns=ns)
    got = json.loads(crds.check("create", "--raw", path, "-f", str(review)))
    assert got["kind"] == "FitReview" and got["status"]["kind"] == "FitResult", got
    assert got["answeredBy"]["pools"] >= 1 and got["status"]["copies"] >= 1, got
    # RBAC at the API server: a user with no grant at all never reaches the operator.
    nobody = crds.run("create", "--raw", path, "-f", str(review), "--as=nobody")
    assert nobody.returncode != 0 and "forbidden" in nobody.stderr.lower(), nobody.stderr
    # A user who may create reviews but not list slices: the operator refuses.
    user = "fit-reviewer"
    _grant(crds, ns, user, _rule("explain.draview.io", "fitreviews", "create"))
    refused = crds.run("create", "--raw", path, "-f", str(review), f"--as={user}")
    assert refused.returncode != 0, refused.stdout
    assert 'cannot list resource "resourceslices" at the cluster scope' in refused.stderr
    # A body that is no FitReview: refused with what is wrong.
    review.write_text(json.dumps({**body, "spec": {"objects": objects}}))
    bad = crds.run("create", "--raw", path, "-f", str(review))
    assert bad.returncode != 0 and "spec.budget is required" in bad.stderr, bad.stderr


def _rule(group: str, resource: str, verb: str = "get") -> dict[str, list[str]]:
    return {"apiGroups": [group], "resources": [resource], "verbs": [verb]}


def _grant(crds: KubeCluster, ns: str, user: str, *rules: dict[str, list[str]]) -> None:
    """A Role of `rules` in `ns`, bound to `user`."""
    crds.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": user, "namespace": ns},
            "rules": list(rules),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": user, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )


def test_the_port_itself_answers_no_one_but_the_front_proxy(explain: dict[str, Any]) -> None:
    ctx = ssl.create_default_context(cafile=str(explain["certs"] / "ca.crt"))
    base = f"https://127.0.0.1:{explain['port']}"
    with urllib.request.urlopen(base + "/apis/explain.draview.io/v1alpha1", context=ctx) as r:
        assert json.load(r)["resources"][0]["name"] == "claimexplanations"
    req = urllib.request.Request(
        base + PATH.format(ns="default", name="x"), headers={"X-Remote-User": "system:admin"}
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, context=ctx)
    assert err.value.code == 401


def test_the_leader_keeps_its_address_in_the_services_endpointslice(
    crds: KubeCluster, explain: dict[str, Any]
) -> None:
    ns = explain["namespace"]
    name = "draview-leader-test-leader"

    def addresses() -> list[str] | None:
        got = crds.run("get", "endpointslice", name, "-n", ns, "-o", "json")
        if got.returncode != 0:
            return None
        return [a for e in json.loads(got.stdout)["endpoints"] for a in e["addresses"]]

    crds.wait_for("the leader's EndpointSlice", lambda: addresses() == ["10.243.7.7"] or None)
    doc = json.loads(crds.check("get", "endpointslice", name, "-n", ns, "-o", "json"))
    assert doc["metadata"]["labels"]["kubernetes.io/service-name"] == "draview-leader-test"
    assert doc["ports"] == [{"name": "https", "port": explain["port"], "protocol": "TCP"}]
    # Owned by its Service: the garbage collector removes it with the Service.
    svc = json.loads(crds.check("get", "service", "draview-leader-test", "-n", ns, "-o", "json"))
    (owner,) = doc["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("Service", svc["metadata"]["uid"])


def test_a_renewed_serving_certificate_is_served_without_a_restart(
    crds: KubeCluster, explain: dict[str, Any]
) -> None:
    certs, port = explain["certs"], explain["port"]

    def served() -> str:
        ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            ctx.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            return str(tls.getpeercert()["serialNumber"])

    before = served()
    serial = renew(certs, explain["namespace"])
    assert serial.upper() != before.upper()
    assert served().upper() == serial.upper()
    # The API server, which trusts the CA, still reaches the port.
    got = json.loads(crds.check("get", "--raw", "/apis/explain.draview.io/v1alpha1"))
    assert got["resources"][0]["name"] == "claimexplanations"
    assert "serving certificate loaded again" in explain["operator"].logs()
