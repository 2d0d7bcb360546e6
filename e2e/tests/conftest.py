"""End-to-end tests: the local control plane (e2e/cluster) or the cluster in $KUBECONFIG."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kubecluster import kube_cluster, kube_namespace  # noqa: F401
