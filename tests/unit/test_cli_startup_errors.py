"""`draview run` that cannot start says so in one line: what it tried (the in-cluster
environment, the kubeconfig files, the API server) and what to set; non-zero exit, and
a traceback only at debug level."""

from __future__ import annotations

import errno
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from draview.cli.main import main
from draview.controller import kubeconfig
from draview.controller.kubeconfig import StartupError

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "{server}", insecure-skip-tls-verify: true}}
users:
- name: u
  user: {{token: t}}
contexts:
- name: ctx
  context: {{cluster: c, user: u}}
- name: other
  context: {{cluster: c, user: u}}
{current}
"""


def write(tmp_path: Path, text: str, name: str = "config") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubeconfig_text(current: str = "current-context: ctx", port: int = 1) -> str:
    return GOOD.format(server=f"https://127.0.0.1:{port}", current=current)


@pytest.fixture
def nowhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Not in a pod, no KUBECONFIG, a home without ~/.kube/config."""
    for name in ("KUBECONFIG", kubeconfig.HOST_ENV, kubeconfig.PORT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


async def failure(kube: str | None, context: str | None = None) -> str:
    with pytest.raises(StartupError) as info:
        await kubeconfig.load(kube, context)
    text = str(info.value)
    assert "\n" not in text
    return text


async def test_no_configuration_anywhere_names_both_places_tried(nowhere: Path) -> None:
    text = await failure(None)
    assert "KUBERNETES_SERVICE_HOST" in text
    assert str(nowhere / ".kube" / "config") in text
    assert "--kubeconfig" in text and "KUBECONFIG" in text


async def test_a_pod_without_its_token_says_so(
    nowhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(kubeconfig.HOST_ENV, "10.0.0.1")
    monkeypatch.setenv(kubeconfig.PORT_ENV, "443")
    monkeypatch.setattr(kubeconfig, "TOKEN_FILE", str(nowhere / "token"))
    text = await failure(None)
    assert f"no service account token at {nowhere / 'token'}" in text


async def test_a_missing_kubeconfig_names_the_file(nowhere: Path) -> None:
    text = await failure("/nonexistent/kubeconfig")
    assert "no kubeconfig file at /nonexistent/kubeconfig" in text
    assert "Expected key" not in text


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("clusters: [\n", "not YAML: expected the node content"),
        ("just a string\n", "is not a kubeconfig"),
        (kubeconfig_text(current=""), "names no current context (its contexts: ctx, other)"),
    ],
)
async def test_a_broken_kubeconfig_says_what_is_wrong(
    nowhere: Path, content: str, said: str
) -> None:
    path = write(nowhere, content)
    text = await failure(path)
    assert said in text and path in text


async def test_an_unknown_context_lists_the_known_ones(nowhere: Path) -> None:
    path = write(nowhere, kubeconfig_text())
    text = await failure(path, "nosuch")
    assert "has no context 'nosuch' (its contexts: ctx, other)" in text


async def test_a_good_kubeconfig_says_where_it_came_from(nowhere: Path) -> None:
    path = write(nowhere, kubeconfig_text())
    assert await kubeconfig.load(path, "other") == f"kubeconfig {path} (context other)"


def _raised(exc: Exception) -> str:
    with pytest.raises(StartupError) as info, kubeconfig.first_contact("https://k:6443", "here"):
        raise exc
    return str(info.value)


def test_first_contact_failures_name_the_server_and_the_credentials() -> None:
    text = _raised(ApiException(status=401, reason="Unauthorized"))
    assert "https://k:6443 refused the credentials of here (401 Unauthorized)" in text
    assert "answered 500" in _raised(ApiException(status=500, reason="Internal Server Error"))
    text = _raised(aiohttp.ClientConnectionError("Connect call failed"))
    assert "cannot reach the API server https://k:6443 named by here" in text


def test_a_taken_port_names_the_flags_that_move_it() -> None:
    with pytest.raises(StartupError) as info, kubeconfig.listening("0.0.0.0", 8080):
        raise OSError(errno.EADDRINUSE, "address already in use")
    assert "0.0.0.0:8080 (address already in use)" in str(info.value)
    assert "--port" in str(info.value)


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", kubeconfig.HOST_ENV)}
    return subprocess.run(
        [sys.executable, "-m", "draview.cli.main", "run", "--log-format", "text", *args],
        env={**env, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT / "operator")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("case", ["missing", "unreachable"])
def test_the_process_logs_one_line_and_exits_1(tmp_path: Path, case: str) -> None:
    if case == "missing":
        args = ["--kubeconfig", str(tmp_path / "nonexistent")]
    else:
        args = ["--kubeconfig", write(tmp_path, kubeconfig_text(port=closed_port()))]
    proc = _run(*args, tmp_path=tmp_path)
    assert proc.returncode == 1
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) == 1, lines
    assert "level=error" in lines[0] and "cannot start: " in lines[0]
    assert "Traceback" not in lines[0]


def test_anything_else_that_escapes_is_one_line_and_the_traceback_is_debug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from draview.controller import logs, operator_main

    async def broken(cfg: object) -> int:
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(operator_main, "run", broken)
    monkeypatch.setattr(logs, "setup", lambda level, fmt: None)  # keep caplog's handler
    caplog.set_level(logging.DEBUG, logger="draview")
    assert main(["run", "--kubeconfig", "/nonexistent"]) == 1
    [fatal] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert fatal.getMessage() == "fatal: RuntimeError: something broke"
    assert fatal.exc_info is None
    assert [r.levelname for r in caplog.records if r.exc_info] == ["DEBUG"]
