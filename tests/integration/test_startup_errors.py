"""`draview run` against a real API server that will not let it start: one log line that
names what was tried and what to set, a non-zero exit, no traceback."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_proc import Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster


def ended(op: Operator, timeout: float = 60) -> tuple[int, list[str]]:
    """The exit code and the log lines of an operator that must stop by itself."""
    assert op.proc is not None
    code = op.proc.wait(timeout=timeout)
    return code, op.logs().splitlines()


def one_error(lines: list[str]) -> str:
    assert len(lines) == 1, lines
    assert "level=error" in lines[0] and "Traceback" not in lines[0], lines[0]
    return lines[0]


def test_refused_credentials_name_the_server_and_the_kubeconfig(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    doc: dict[str, Any] = yaml.safe_load(Path(kube_cluster.kubeconfig).read_text())
    for user in doc["users"]:
        user["user"] = {"token": "not-a-valid-token"}
    bad = tmp_path / "bad-credentials"
    bad.write_text(yaml.safe_dump(doc))
    code, lines = ended(Operator(str(bad), ("--leader-elect", "false")).start(tmp_path))
    line = one_error(lines)
    assert code == 1
    assert "refused the credentials of kubeconfig" in line and "401" in line
    assert str(bad) in line and doc["clusters"][0]["cluster"]["server"] in line


def test_an_unknown_context_lists_the_contexts_there_are(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    args = ("--leader-elect", "false", "--context", "no-such-context")
    code, lines = ended(Operator(kube_cluster.kubeconfig, args).start(tmp_path))
    line = one_error(lines)
    assert code == 1
    assert "has no context 'no-such-context' (its contexts: " in line


def test_a_taken_port_is_named_with_the_flag_that_moves_it(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        op = Operator(kube_cluster.kubeconfig, ("--leader-elect", "false"), port=port)
        code, lines = ended(op.start(tmp_path))
    assert code == 1
    # What the operator logs before it binds (the profile it judges by, what it
    # watches) comes first; the failure is the last line and the only error.
    errors = [ln for ln in lines if "level=error" in ln or "level=critical" in ln]
    assert errors == lines[-1:], lines
    assert f"127.0.0.1:{port}" in errors[0] and "--port" in errors[0]
    assert "Traceback" not in op.logs()
