"""Integration tests run against a real API server: the local control plane (e2e/cluster)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubecluster import kube_cluster, kube_namespace  # noqa: F401
