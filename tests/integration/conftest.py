"""Integration tests run against a real API server: the local control plane (e2e/cluster)."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from operator_proc import Operator

from kubecluster import KubeCluster, kube_cluster, kube_namespace  # noqa: F401


@pytest.fixture(scope="session")
def crds(kube_cluster: KubeCluster) -> KubeCluster:  # noqa: F811
    """The cluster with draview's CRDs installed and established."""
    kube_cluster.apply_crds()
    return kube_cluster


@pytest.fixture(scope="module")
def operator(crds: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """One operator (no leader election) for a test module; it must stop cleanly."""
    op = Operator(crds.kubeconfig, ("--leader-elect", "false")).start(tmp_path_factory.mktemp("op"))
    op.wait_ready()
    yield op
    assert op.stop() == 0, op.logs()
