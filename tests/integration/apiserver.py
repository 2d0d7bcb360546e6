"""The local control plane's kube-apiserver as a process, for the tests and the fault
bench that stop it: where its pid is, its command line, whether it has exited, and
starting it again as e2e/cluster started it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

STATE = Path(os.environ.get("DRAVIEW_CLUSTER_DIR") or Path.home() / ".cache/draview-cluster/run")
PIDFILE = STATE / "pids" / "kube-apiserver.pid"


def pid() -> int:
    assert PIDFILE.exists(), f"the local control plane left no pid file at {PIDFILE}"
    return int(PIDFILE.read_text())


def command(of: int) -> list[str]:
    """The command line of a running API server, to start it again the same way."""
    return [c.decode() for c in Path(f"/proc/{of}/cmdline").read_bytes().split(b"\0")[:-1]]


def gone(of: int) -> bool:
    """Exited: no such process, or a zombie nobody has reaped yet (its parent may be a
    test run that ended long ago)."""
    try:
        return Path(f"/proc/{of}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def start(cmd: list[str]) -> int:
    """Start the API server with `cmd`, appending to its log; the pid file then names the
    new process, so that e2e/cluster/down stops this one."""
    with open(STATE / "logs" / "kube-apiserver.log", "ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    PIDFILE.write_text(f"{proc.pid}\n")
    return proc.pid
