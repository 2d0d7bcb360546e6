"""The local control plane's audit log (e2e/cluster/up records every write to
draview.io): who wrote what, and when, as the API server saw it."""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubecluster import _state_dir


@dataclass(frozen=True)
class Write:
    at: dt.datetime  # when the API server finished the request
    began: dt.datetime  # when it received it
    agent: str
    verb: str
    resource: str
    name: str
    code: int


def audit_log() -> Path:
    if os.environ.get("KUBECONFIG"):
        pytest.skip("needs the local control plane's audit log")
    path = _state_dir() / "logs" / "audit.log"
    if not path.exists():
        # The local control plane always writes one now: missing means it was started by
        # an older `up` and the proofs of one writer would silently not run.
        pytest.fail(
            f"no audit log at {path}: the local control plane predates it; restart it "
            "(e2e/cluster/down, then e2e/cluster/up)"
        )
    return path


def writes(path: Path, agent_part: str) -> list[Write]:
    """draview.io writes by user agents containing `agent_part`, in the order they ended."""
    out = []
    with path.open() as f:
        for line in f:
            if agent_part not in line:
                continue
            ev = json.loads(line)
            ref = ev.get("objectRef") or {}
            if ref.get("apiGroup") != "draview.io" or ev.get("stage") != "ResponseComplete":
                continue
            out.append(
                Write(
                    at=_time(ev["stageTimestamp"]),
                    began=_time(ev.get("requestReceivedTimestamp") or ev["stageTimestamp"]),
                    agent=ev.get("userAgent", ""),
                    verb=ev["verb"],
                    resource=ref.get("resource", ""),
                    name=ref.get("name", ""),
                    code=(ev.get("responseStatus") or {}).get("code", 0),
                )
            )
    return sorted(out, key=lambda w: w.at)


def _time(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
