"""e2e/cluster/down stops every process of its control plane, also one whose pid file is
gone (a start that failed half-way): otherwise it keeps its port and the next
e2e/cluster/up fails on it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kubecluster import _script, side_cluster

RELEASE = "1.37"


def _processes(state_dir: Path) -> list[str]:
    """The command lines that name this control plane's directory."""
    out = subprocess.run(
        ["pgrep", "-fa", "--", f"{state_dir}/"], capture_output=True, text=True, check=False
    )
    return [line for line in out.stdout.splitlines() if str(os.getpid()) != line.split()[0]]


def test_down_stops_a_component_whose_pid_file_is_gone(tmp_path: Path) -> None:
    state = tmp_path / "cluster"
    with side_cluster(RELEASE, state) as k:
        assert k.kubeconfig
        (state / "pids" / "kube-scheduler.pid").unlink()
        scheduler = [p for p in _processes(state) if "kube-scheduler" in p.split()[1]]
        assert len(scheduler) == 1, _processes(state)
    # side_cluster ran e2e/cluster/down with the same directory and ports.
    assert _processes(state) == []
    again = _script("down", env={"DRAVIEW_CLUSTER_DIR": str(state)})
    assert again.returncode == 0, again.stderr
