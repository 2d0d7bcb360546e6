"""Feature gates against a real API server: the gates it reports in /metrics that are not
DRA gates are listed as ignored in one line, every DRA gate it reports is one draview
knows, and a misspelt gate on the command line stops `draview run` before it starts."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from operator_proc import ROOT, Operator
from test_kubectl_dra import dra

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster


def test_the_operator_lists_the_gates_it_ignores_and_knows_every_dra_gate(
    crds: KubeCluster, tmp_path: Path
) -> None:
    op = Operator(crds.kubeconfig, ("--leader-elect", "false")).start(tmp_path)
    try:
        op.wait_ready()
        lines = op.logs().splitlines()
    finally:
        assert op.stop() == 0, op.logs()
    ignored = [ln for ln in lines if "feature gate(s) that are not DRA gates" in ln]
    assert len(ignored) == 1 and "level=info" in ignored[0], ignored
    # A DRA gate of this release that draview's tables lack would be a warning here.
    assert not [ln for ln in lines if "draview does not know" in ln], lines
    assert any("judging as Kubernetes" in ln and "gates=cluster" in ln for ln in lines), lines


def test_a_misspelt_gate_stops_draview_run_at_once(crds: KubeCluster) -> None:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "draview.cli.main", "run", "--kubeconfig", crds.kubeconfig,
         "--feature-gates", "DRAPartitionableDevice=true"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and time.monotonic() - started < 30
    assert proc.stderr.count("\n") == 1
    assert "did you mean DRAPartitionableDevices?" in proc.stderr


def test_kubectl_dra_names_flag_gates_it_ignores_on_a_live_cluster(crds: KubeCluster) -> None:
    proc = dra(crds, "get", "pools", "--live", "--feature-gates", "AllAlpha=false")
    assert proc.returncode == 0, proc.stderr
    assert "warning: ignoring 1 feature gate(s) that are not DRA gates" in proc.stderr
    proc = dra(crds, "get", "pools", "--feature-gates", "DRADeviceTaint=true")
    assert proc.returncode == 2 and "did you mean DRADeviceTaints?" in proc.stderr
