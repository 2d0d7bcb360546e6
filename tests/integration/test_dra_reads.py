"""`kubectl dra` reads only what a question needs, and answers the same as a whole read.

Against the local control plane with the operator running: node, driver and pool filters
go to the API server as selectors, one slice is one GET, `why` takes the allocations from
the operator's slice statuses; each answer is compared with the one computed from
everything (--live) or read through kubectl (--kubectl), including for a user whose RBAC
hides other namespaces' claims.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_helpers import DRIVER, allocate, claim, rslice, uniq, wait_states
from operator_proc import Operator
from test_kubectl_dra import dra

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
NODE = "node-1"


def answer(k: KubeCluster, *args: str, **kw: Any) -> Any:
    """-o json, parsed; a list's items (`get` prints a kubectl-style List)."""
    proc = dra(k, *args, "-o", "json", **kw)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    return doc["items"] if doc.get("kind") == "List" else doc


def allocated_class(k: KubeCluster) -> None:
    k.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "test-class"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )


@pytest.fixture
def world(operator: Operator, crds: KubeCluster, kube_namespace: str) -> Iterator[dict[str, str]]:
    """Two node-local pools on node-1 and node-2, and a network pool every node reaches,
    one device of each allocated; the operator has written every status."""
    allocated_class(crds)
    names = {
        "local": uniq("pool"),
        "other": uniq("pool"),
        "net": uniq("fabric"),
    }
    slices = {key: f"{pool}-s" for key, pool in names.items()}
    local = rslice(slices["local"], names["local"], [{"name": "gpu-0"}, {"name": "gpu-1"}])
    other = rslice(slices["other"], names["other"], [{"name": "gpu-0"}, {"name": "gpu-1"}])
    other["spec"]["nodeName"] = "node-2"
    net = rslice(slices["net"], names["net"], [{"name": "nic-0"}, {"name": "nic-1"}])
    del net["spec"]["nodeName"]
    net["spec"]["allNodes"] = True
    crds.create(local, other, net)
    try:
        allocate(crds, kube_namespace, "held", names["local"], "gpu-1")
        allocate(crds, kube_namespace, "fabric", names["net"], "nic-0")
        for key in ("local", "net"):
            first = "gpu-0" if key != "net" else "nic-0"
            second = "gpu-1" if key != "net" else "nic-1"
            want = {
                first: ("Allocated" if key == "net" else "Available", None),
                second: ("Available" if key == "net" else "Allocated", None),
            }
            wait_states(crds, slices[key], want)
        wait_states(
            crds, slices["other"], {"gpu-0": ("Available", None), "gpu-1": ("Available", None)}
        )
        yield {
            **{f"{k}-pool": v for k, v in names.items()},
            **{f"{k}-slice": v for k, v in slices.items()},
        }
    finally:
        for claim in ("held", "fabric"):
            crds.run("delete", "resourceclaim", claim, "-n", kube_namespace, "--ignore-not-found")
        crds.delete("resourceslice", *slices.values())


def pools_of(doc: Any, ours: set[str]) -> list[dict[str, Any]]:
    """The pools of this test among whatever other tests left, without volatile fields."""
    out = []
    for o in doc:
        if o["spec"]["pool"] not in ours:
            continue
        out.append({"spec": o["spec"], "summary": o["status"]["summary"]})
    return sorted(out, key=lambda o: o["spec"]["pool"])


@pytest.mark.parametrize("through_kubectl", [False, True], ids=["api-server", "kubectl"])
def test_node_driver_and_pool_filters_answer_as_a_whole_read(
    crds: KubeCluster, world: dict[str, str], through_kubectl: bool
) -> None:
    ours = {world["local-pool"], world["other-pool"], world["net-pool"]}
    everything = answer(crds, "get", "pools", "--live", kubectl=through_kubectl)
    on_node = answer(crds, "get", "pools", "--node", NODE, kubectl=through_kubectl)
    # node-1 reaches its own pool and the network pool, not node-2's.
    assert {p["spec"]["pool"] for p in pools_of(on_node, ours)} == {
        world["local-pool"],
        world["net-pool"],
    }
    whole = [p for p in pools_of(everything, ours) if p["spec"]["pool"] != world["other-pool"]]
    assert pools_of(on_node, ours) == whole
    one = answer(
        crds,
        "get",
        "pools",
        "--driver",
        DRIVER,
        "--pool",
        world["other-pool"],
        kubectl=through_kubectl,
    )
    assert [p["spec"]["pool"] for p in one] == [world["other-pool"]]
    assert pools_of(one, ours) == [
        p for p in pools_of(everything, ours) if p["spec"]["pool"] == world["other-pool"]
    ]
    by_driver = answer(crds, "get", "pools", "--driver", DRIVER, kubectl=through_kubectl)
    assert pools_of(by_driver, ours) == pools_of(everything, ours)
    devices = answer(crds, "get", "devices", "--node", "node-2", kubectl=through_kubectl)
    mine = sorted((d["pool"], d["name"], d["state"]) for d in devices if d["pool"] in ours)
    assert mine == [
        (world["net-pool"], "nic-0", "Allocated"),
        (world["net-pool"], "nic-1", "Available"),
        (world["other-pool"], "gpu-0", "Available"),
        (world["other-pool"], "gpu-1", "Available"),
    ]


def _without_source(doc: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(doc).replace('"computed"', '"operator"'))


def test_describe_reads_one_slice_and_one_node_as_the_whole_read_does(
    crds: KubeCluster, world: dict[str, str]
) -> None:
    name = world["local-slice"]
    narrow = answer(crds, "describe", "resourceslice", name)
    live = answer(crds, "describe", "resourceslice", name, "--live")
    assert narrow["status"]["status"]["devices"] == live["status"]["status"]["devices"]
    assert narrow["poolStatus"]["status"]["summary"] == live["poolStatus"]["status"]["summary"]
    node = answer(crds, "describe", "node", NODE)
    node_live = answer(crds, "describe", "node", NODE, "--live")
    ours = {world["local-pool"], world["net-pool"]}
    mine = [p for p in node["pools"] if p["pool"] in ours]
    assert [p["pool"] for p in mine] == sorted(ours)
    assert mine == [p for p in node_live["pools"] if p["pool"] in ours]
    text = dra(crds, "describe", "resourceslice", name).stdout
    assert "Status Source:" in text and "draview operator" in text
    missing = dra(crds, "describe", "resourceslice", "no-such-slice")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1, missing.stderr
    assert "not found" in missing.stderr


def test_why_counts_the_operators_allocations_exactly_as_every_claim(
    crds: KubeCluster, world: dict[str, str], kube_namespace: str
) -> None:
    crds.create(claim("wants-three", 3), namespace=kube_namespace)
    proc = dra(crds, "why", "wants-three", "-n", kube_namespace, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert "allocations as recorded in the draview operator's" in proc.stderr
    live = answer(crds, "why", "wants-three", "-n", kube_namespace, "--live")
    assert json.loads(proc.stdout) == live
    held = dra(crds, "why", "held", "-n", kube_namespace, "-o", "json")
    assert held.returncode == 0, held.stderr
    assert "judged on the pools the claim is allocated in" in held.stderr
    doc = json.loads(held.stdout)
    assert doc["allocated"] is True
    # Judged on its own pool only: two devices, one of them its own.
    choice = doc["requests"][0]["choices"][0]
    assert choice["matchedDevices"] == 2, choice


def test_paging_timeouts_and_bad_flags(crds: KubeCluster, world: dict[str, str]) -> None:
    ours = {world["local-pool"], world["other-pool"], world["net-pool"]}
    paged = answer(crds, "get", "pools", "--chunk-size", "1")
    assert pools_of(paged, ours) == pools_of(answer(crds, "get", "pools"), ours)
    assert len(pools_of(paged, ours)) == 3
    bad = dra(crds, "get", "pools", "--request-timeout", "soon")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --request-timeout: ")
    assert bad.stderr.count("\n") == 1
    ok = dra(crds, "get", "pools", "--request-timeout", "30s")
    assert ok.returncode == 0 and "read" not in ok.stderr  # no progress line off a terminal


def test_an_unreachable_server_and_a_refused_token_are_one_line(
    crds: KubeCluster, tmp_path: Path
) -> None:
    admin = json.loads(crds.check("config", "view", "--raw", "--minify", "-o", "json"))
    cluster = admin["clusters"][0]["cluster"]
    for server, token, want in (
        ("https://127.0.0.1:1", "x", "cannot reach the API server https://127.0.0.1:1"),
        (cluster["server"], "not-a-token", "refused the credentials"),
    ):
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {**cluster, "server": server}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
        path = tmp_path / f"cfg-{uuid.uuid4().hex[:6]}"
        path.write_text(yaml.safe_dump(cfg))
        proc = dra(crds, "get", "pools", kubeconfig=str(path))
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.count("\n") == 1 and want in proc.stderr, proc.stderr
