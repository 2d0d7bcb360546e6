"""The explain API for bench/cli: the operator started again on this machine with its
HTTPS port, registered with the control plane as tests/integration does it
(tests/explain_local.py), for as long as the `with` lasts. It starts on the world the
first operator left in sync: it judges every pool again and writes nothing."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from explain_local import APISERVICE, registration, serving_cert  # noqa: E402

NAMESPACE = "default"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def serving(kubectl: str, env: dict[str, str], log: Path, timeout: float = 900) -> Iterator[float]:
    """Yields the seconds the operator took to be ready (its first judgement of every
    pool); the APIService is Available by then."""
    with tempfile.TemporaryDirectory() as tmp:
        certs = Path(tmp)
        ca = serving_cert(certs, NAMESPACE)
        port, health = _free_port(), _free_port()
        cmd = [
            sys.executable, "-m", "draview.cli.main", "run", "--leader-elect", "false",
            "--bind-address", "127.0.0.1", "--port", str(health), "--log-format", "text",
            "--explain-port", str(port), "--explain-cert-dir", str(certs),
        ]  # fmt: skip
        objs = {"kind": "List", "apiVersion": "v1", "items": registration(NAMESPACE, port, ca)}
        t0 = time.monotonic()
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            subprocess.run(
                [kubectl, "apply", "-f", "-"], input=json.dumps(objs).encode(), env=env,
                check=True, capture_output=True,
            )  # fmt: skip
            while not _ready(health):
                if proc.poll() is not None or time.monotonic() - t0 > timeout:
                    raise SystemExit(f"the explain operator did not become ready; see {log}")
                time.sleep(1)
            ready = time.monotonic() - t0
            subprocess.run(
                [kubectl, "wait", "--for=condition=Available", f"apiservice/{APISERVICE}",
                 "--timeout=120s"], env=env, check=True, capture_output=True,
            )  # fmt: skip
            yield round(ready, 1)
        finally:
            subprocess.run(
                [kubectl, "delete", "apiservice", APISERVICE, "--ignore-not-found"],
                env=env, check=False, capture_output=True,
            )  # fmt: skip
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
