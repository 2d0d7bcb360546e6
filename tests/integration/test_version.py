"""`kubectl dra version` against the local control plane: the release it serves and the
profile draview detects for it, as the operator logs it at start-up."""

from __future__ import annotations

import json

import pytest
from test_kubectl_dra import dra

from draview.engine.profile import RELEASES
from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize("through_kubectl", [False, True], ids=["api-server", "kubectl"])
def test_kubectl_dra_version_shows_the_clusters_profile(
    kube_cluster: KubeCluster, through_kubectl: bool
) -> None:
    proc = dra(kube_cluster, "version", "-o", "json", kubectl=through_kubectl)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["kind"] == "Version" and info["kubernetesReleases"] == list(RELEASES)
    # kubectl's own version where there is a kubectl; the plugin does not need one.
    assert bool(info["kubectl"]) or not through_kubectl, info
    cluster = info["cluster"]
    release = kube_cluster.server_release()
    assert cluster["error"] is None and cluster["serverVersion"].startswith(f"v{release}.")
    profile = cluster["profile"]
    # The admin may read /metrics: the gates are the cluster's own, every DRA gate of
    # the release is one draview knows, and the rest are listed as ignored.
    assert (profile["kubernetesVersion"], profile["source"]) == (release, "cluster")
    assert cluster["unknownGates"] == [] and cluster["ignoredGates"]
    assert cluster["label"].startswith(f"Kubernetes {release}")
    proc = dra(kube_cluster, "version", kubectl=through_kubectl)
    assert proc.returncode == 0 and f"Kubernetes {release}" in proc.stdout
    assert "Cluster profile:" in proc.stdout


@pytest.mark.parametrize("through_kubectl", [False, True], ids=["api-server", "kubectl"])
def test_kubectl_dra_version_says_when_the_cluster_cannot_be_read(
    kube_cluster: KubeCluster, through_kubectl: bool
) -> None:
    proc = dra(kube_cluster, "version", "--context", "no-such-context", kubectl=through_kubectl)
    assert proc.returncode == 1
    assert "draview:" in proc.stdout and "Cluster profile:     cannot read it:" in proc.stdout
