"""Tests on a real node: draview's image, installed with Helm, running as Pods beside a real
DRA driver (e2e/node). `e2e/node/test` sets the node up, builds and loads the image,
installs the driver and the chart, then runs these with $KUBECONFIG pointing at it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest

from kubecluster import KubeCluster, kube_cluster, kube_namespace  # noqa: F401
from node import Release, setting


@pytest.fixture(scope="session")
def release(kube_cluster: KubeCluster) -> Release:  # noqa: F811
    """The release e2e/node/test installed, once both replicas are Ready."""
    rel = Release(
        kube_cluster,
        name=setting("DRAVIEW_RELEASE_NAME"),
        namespace=setting("DRAVIEW_NAMESPACE"),
        image=setting("DRAVIEW_NODE_IMAGE"),
    )
    kube_cluster.wait_for("two Ready replicas", lambda: len(rel.ready_pods()) == 2, timeout=120)
    return rel
