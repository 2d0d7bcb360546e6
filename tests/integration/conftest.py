"""Integration tests run against a real API server: the local control plane (e2e/cluster)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubecluster import KubeCluster, kube_cluster, kube_namespace  # noqa: F401


@pytest.fixture(scope="session")
def crds(kube_cluster: KubeCluster) -> KubeCluster:  # noqa: F811
    """The cluster with draview's CRDs installed and established."""
    root = Path(__file__).resolve().parents[2]
    kube_cluster.check("apply", "-k", str(root / "deploy" / "crds"))
    kube_cluster.check(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/resourceslicestatuses.draview.io",
        "crd/resourcepoolstatuses.draview.io",
    )
    return kube_cluster
