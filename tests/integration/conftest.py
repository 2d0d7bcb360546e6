"""Integration tests run against a real API server: the local control plane (e2e/cluster)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubecluster import KubeCluster, kube_cluster, kube_namespace  # noqa: F401


@pytest.fixture(scope="session")
def crds(kube_cluster: KubeCluster) -> KubeCluster:  # noqa: F811
    """The cluster with draview's CRDs installed and established."""
    kube_cluster.apply_crds()
    return kube_cluster
