"""A cluster draview cannot judge, for real: a Kubernetes 1.33 API server (no
resource.k8s.io/v1) built and started beside the test run's control plane.

The operator must say so in one error line, keep /healthz ok and answer /readyz with the
reason (so the pod is reported not ready instead of restarted in a loop), and exit
non-zero when stopped; `kubectl dra` must fail with one line too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from operator_proc import Operator

from kubecluster import KubeCluster, side_cluster

pytestmark = pytest.mark.cluster

REASON = "Kubernetes 1.33 is not supported: it serves no resource.k8s.io/v1"


@pytest.fixture(scope="module")
def old_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    with side_cluster("1.33", tmp_path_factory.mktemp("k133"), gates="defaults") as k:
        yield k


def test_the_operator_refuses_with_a_reason_and_no_crash_loop(
    old_cluster: KubeCluster, tmp_path: Path
) -> None:
    assert old_cluster.server_release() == "1.33"
    op = Operator(old_cluster.kubeconfig, ("--leader-elect", "false")).start(tmp_path)
    try:
        deadline = time.monotonic() + 60
        while op.get("/readyz")[0] != 503 and time.monotonic() < deadline:
            assert op.proc is not None and op.proc.poll() is None, op.logs()
            time.sleep(0.2)
        code, body = op.get("/readyz")
        assert (code, body.strip()) == (503, REASON + "; draview supports 1.34 to 1.37")
        assert op.get("/healthz")[0] == 200
        time.sleep(2)  # still up: nothing retries into a crash
        assert op.proc is not None and op.proc.poll() is None
        errors = [line for line in op.logs().splitlines() if REASON in line]
        assert len(errors) == 1, op.logs()
        assert "Traceback" not in op.logs()
    finally:
        assert op.stop() == 3, op.logs()


@pytest.mark.parametrize("through_kubectl", [False, True], ids=["api-server", "kubectl"])
def test_kubectl_dra_refuses_in_one_line(old_cluster: KubeCluster, through_kubectl: bool) -> None:
    via = ["--kubectl", old_cluster.kubectl] if through_kubectl else []
    env = {k: v for k, v in os.environ.items() if k != "DRAVIEW_KUBECTL"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "draview.cli.dra.main",
            "--kubeconfig",
            old_cluster.kubeconfig,
            *via,
            "get",
            "pools",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {REASON}") and proc.stderr.count("\n") == 1
