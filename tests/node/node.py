"""What the node tests share: the node's settings as e2e/node set them, Helm, and small
questions about the installed release."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubecluster import REPO_ROOT, KubeCluster

NODE_DIR = REPO_ROOT / "e2e" / "node"
DRIVER = "test-driver.cdi.k8s.io"


def setting(name: str) -> str:
    """A value e2e/node/test exported for these tests; missing means they were started
    without the node, which is a mistake to report, not a reason to skip."""
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"${name} is not set: run the node tests with e2e/node/test")
    return value


@dataclass(frozen=True)
class Release:
    """The Helm release of draview under test."""

    k: KubeCluster
    name: str
    namespace: str
    image: str

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        helm = setting("HELM")
        out = subprocess.run(
            [helm, f"--kubeconfig={self.k.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if check and out.returncode != 0:
            pytest.fail(f"helm {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
        return out

    def pods(self) -> list[dict[str, Any]]:
        out = self.k.check(
            "-n", self.namespace, "get", "pods", "-o", "json",
            "-l", f"app.kubernetes.io/instance={self.name}",
        )  # fmt: skip
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def ready_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.pods() if pod_ready(p)]

    def leader(self) -> str:
        """The holder of the chart's Lease (the Pod's name is the replica's identity)."""
        lease = self.k.get("lease", "draview-leader", self.namespace)
        return str(lease["spec"].get("holderIdentity") or "")


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


def state_dir() -> Path:
    default = Path.home() / ".cache" / "draview-node" / "run"
    return Path(os.environ.get("DRAVIEW_NODE_DIR") or default)
