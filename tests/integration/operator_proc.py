"""Run `draview run` as a real process against the local control plane."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Operator:
    kubeconfig: str
    args: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    def start(self, log_dir: Path) -> Operator:
        self.log_path = log_dir / f"operator-{self.port}.log"
        cmd = [
            sys.executable,
            "-m",
            "draview.cli.main",
            "run",
            "--port",
            str(self.port),
            "--bind-address",
            "127.0.0.1",
            "--batch-interval",
            "0.2",
            "--log-format",
            "text",
            *self.args,
        ]
        env = {**os.environ, "KUBECONFIG": self.kubeconfig}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT
            )
        return self

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")
        except OSError:
            return 0, ""

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.logs()
            if self.get("/readyz")[0] == 200:
                return
            time.sleep(0.2)
        raise AssertionError(f"operator not ready after {timeout}s:\n{self.logs()}")

    def metric(self, name: str, **labels: str) -> float:
        """Sum of a metric's samples matching the labels (0 when absent)."""
        _, text = self.get("/metrics")
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            head, _, value = line.rpartition(" ")
            if head.split("{")[0] != name:
                continue
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
        return total

    def logs(self) -> str:
        return self.log_path.read_text() if self.log_path and self.log_path.exists() else ""

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
