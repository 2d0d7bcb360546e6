"""SIGTERM in the middle of writing: what was taken for a batch is still written, within
the shutdown deadline, and the process exits 0."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from operator_helpers import rslice, slice_status, uniq
from operator_proc import Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster


def test_sigterm_mid_batch_flushes_everything_taken_then_exits_0(
    crds: KubeCluster, tmp_path: Path
) -> None:
    args = ("--leader-elect", "false", "--qps", "2", "--burst", "1", "--shutdown-timeout", "25")
    op = Operator(crds.kubeconfig, args).start(tmp_path)
    tag = uniq("term")
    names = [f"{tag}-{i}" for i in range(5)]
    try:
        op.wait_ready()
        # 20 writes at 2 per second: ~10 s, so SIGTERM lands in the middle of the batch.
        crds.create(*(rslice(n, n, [{"name": "gpu-0"}]) for n in names))
        crds.wait_for("writing started", lambda: slice_status(crds, names[0]), timeout=30)
        assert op.proc is not None
        began = time.monotonic()
        op.proc.send_signal(signal.SIGTERM)
        try:
            code = op.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"no exit 30 s after SIGTERM:\n{op.logs()}")
        assert code == 0, op.logs()
        assert time.monotonic() - began < 25 + 6
        missing = [n for n in names if slice_status(crds, n) is None]
        assert not missing, op.logs()
    finally:
        op.stop()
        crds.delete("resourceslice", *names)
