"""draview on a real control plane of one supported release (`make test-matrix` runs this
module once per release, each against that release's own build from e2e/cluster).

The operator must judge with that cluster's own profile (release from /version, gates
from /metrics), watch the versions the server prefers, write statuses for the examples
that release accepts, equal `draview analyze --kubernetes-version` of the same world, be
ready, and show a claim change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from analyzed import assert_converges
from operator_helpers import allocate, load_examples, rslice, uniq, wait_states
from operator_proc import Operator

from draview.engine.profile import parse_release
from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = ("--partition-attribute", "gpu.example.com/profile")
# Every cluster-ready example each release's API server accepts (its DRA gates on;
# e2e/load_examples.py puts DeviceTaintRules in the version the server serves). 1.34
# refuses taint effect None (1.35+) and devices that consume counter sets defined in
# another slice of the pool (the 1.35 layout); fractional capacity ranges and
# bindsToNode are fields from 1.36 on (examples/README.md).
EXAMPLES = {
    "1.34": ["gpus", "shareable-nic", "driver-update"],
    "1.35": ["gpus", "shareable-nic", "taints", "driver-update", "mig-a100", "tpu-multihost"],
}
EXAMPLES["1.36"] = EXAMPLES["1.37"] = [*EXAMPLES["1.35"], "cpu-shares", "fabric-gpus"]


def default_release() -> str:
    for line in (ROOT / "e2e" / "releases").read_text().splitlines():
        if line.startswith("default "):
            return line.split()[1]
    raise AssertionError("e2e/releases names no default")


RELEASE = parse_release(os.environ.get("DRAVIEW_K8S_VERSION") or default_release())


@pytest.fixture(scope="module")
def live(
    kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[KubeCluster, Operator]]:
    k = kube_cluster
    k.apply_crds()
    files = [str(ROOT / "examples" / f"{name}.yaml") for name in EXAMPLES[RELEASE]]
    op = Operator(k.kubeconfig, ("--leader-elect", "false", *PARTITIONS))
    op.start(tmp_path_factory.mktemp("live"))
    try:
        op.wait_ready(timeout=90)
        load_examples(k, files)
        yield k, op
    finally:
        code = op.stop()
        k.run("delete", "-f", ",".join(files), "--ignore-not-found", "--wait=false")
        assert code == 0, op.logs()


def test_the_control_plane_is_the_release(live: tuple[KubeCluster, Operator]) -> None:
    k, _ = live
    assert k.server_release() == RELEASE


def test_the_operator_judges_with_the_clusters_own_profile(
    live: tuple[KubeCluster, Operator],
) -> None:
    _, op = live
    assert op.get("/readyz")[0] == 200
    assert f"judging as Kubernetes {RELEASE}" in op.logs(), op.logs()
    assert op.metric("draview_profile_info", kubernetes_version=RELEASE, gates="cluster") == 1
    # Slices and claims in resource.k8s.io/v1, which every supported release serves and
    # prefers; DeviceTaintRules in the version the release has.
    watching = [line for line in op.logs().splitlines() if "msg=watching" in line]
    assert watching, op.logs()
    rules = {"1.34": "v1alpha3", "1.35": "v1alpha3", "1.36": "v1beta2", "1.37": "v1"}[RELEASE]
    for plural, version in (("resourceslices", "v1"), ("resourceclaims", "v1")):
        assert f'"{plural}": "{version}"' in watching[0], watching[0]
    assert f'"devicetaintrules": "{rules}"' in watching[0], watching[0]


def test_the_examples_converge_on_what_analyze_computes_for_that_release(
    live: tuple[KubeCluster, Operator],
) -> None:
    k, _ = live
    assert_converges(k, *PARTITIONS, timeout=90)
    pools = json.loads(k.check("get", "resourcepoolstatuses", "-o", "json"))["items"]
    assert pools and {p["status"]["profile"]["kubernetesVersion"] for p in pools} == {RELEASE}


def test_a_claim_change_is_visible(live: tuple[KubeCluster, Operator], kube_namespace: str) -> None:
    k, _ = live
    pool, name = uniq("pool"), uniq("slice")
    k.create(rslice(name, pool, [{"name": "gpu-0"}, {"name": "gpu-1"}]))
    try:
        wait_states(k, name, {"gpu-0": ("Available", None), "gpu-1": ("Available", None)})
        allocate(k, kube_namespace, "c1", pool, "gpu-1")
        wait_states(k, name, {"gpu-0": ("Available", None), "gpu-1": ("Allocated", None)})
    finally:
        k.delete("resourceslice", name)
