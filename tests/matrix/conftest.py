"""The live smoke of one release: the local control plane of DRAVIEW_K8S_VERSION (default:
the default release of e2e/releases), built and started once for the whole run."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from kubecluster import kube_cluster, kube_namespace  # noqa: F401
