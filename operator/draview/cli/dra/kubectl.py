"""kubectl as the transport (--kubectl): for credentials only kubectl understands.

Each request is a kubectl process and kubectl's own JSON re-encoding of what it read, so
the API server path (rest.py) is the default; this one stays for the clusters it cannot
reach.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from draview.cli.dra.cluster import (
    EVERYTHING,
    KINDS,
    Cluster,
    Forbidden,
    NotFound,
    NotServed,
    Query,
)
from draview.cli.dra.common import CliError


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    # kubectl's own "error: " prefix: ours is printed before it ("error: error: stat …").
    return lines[-1].removeprefix("error: ") if lines else "kubectl failed"


@dataclass
class Kubectl(Cluster):
    binary: str
    kubeconfig: str | None = None
    context: str | None = None
    # --request-timeout as kubectl takes it; the process itself gets a generous bound.
    request_timeout: str | None = None
    chunk_size: int | None = None
    timeout: float = 600
    _can_i: dict[tuple[str, str, str], bool] = field(default_factory=dict)
    _versions: tuple[str | None, str | None, str] | None = None

    @classmethod
    def find(cls, explicit: str | None, kubeconfig: str | None, context: str | None) -> Kubectl:
        binary = explicit or os.environ.get("DRAVIEW_KUBECTL") or "kubectl"
        if os.sep not in binary and shutil.which(binary) is None:
            raise CliError(
                f"kubectl not found: {binary!r} (use --kubectl PATH or $DRAVIEW_KUBECTL)"
            )
        return cls(binary, kubeconfig, context)

    @property
    def transport(self) -> str:
        return "kubectl"

    def _base(self) -> list[str]:
        cmd = [self.binary]
        if self.kubeconfig:
            cmd.append(f"--kubeconfig={self.kubeconfig}")
        if self.context:
            cmd.append(f"--context={self.context}")
        if self.request_timeout:
            cmd.append(f"--request-timeout={self.request_timeout}")
        return cmd

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                [*self._base(), *args],
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError:
            raise CliError(f"kubectl not found: {self.binary!r}") from None
        except subprocess.TimeoutExpired:
            raise CliError(f"kubectl {' '.join(args)} timed out after {self.timeout:g} s") from None

    def get_json(self, *args: str) -> Any:
        """`kubectl get ARGS -o json`, parsed; typed errors for the cases callers handle."""
        proc = self.run("get", *args, "-o", "json")
        if proc.returncode != 0:
            msg = _one_line(proc.stderr)
            low = msg.lower()
            if "doesn't have a resource type" in low or "the server could not find" in low:
                raise NotServed(msg)
            if "forbidden" in low:
                raise Forbidden(msg)
            if "notfound" in low.replace(" ", "") or "not found" in low:
                raise NotFound(msg)
            raise CliError(msg)
        try:
            return json.loads(proc.stdout or "{}")
        except json.JSONDecodeError:
            raise CliError(f"kubectl get {' '.join(args)}: output is not JSON") from None

    def items(self, resource: str, *args: str) -> list[dict[str, Any]]:
        doc = self.get_json(resource, *args)
        items = doc.get("items") if isinstance(doc, dict) else None
        return [i for i in items or [] if isinstance(i, dict)]

    def list(self, kind: str, query: Query = EVERYTHING) -> list[dict[str, Any]]:
        k = KINDS[kind]
        args = ["-A"] if k.namespaced else []
        if query.labels:
            args.append(f"--selector={query.labels}")
        if query.fields:
            args.append(f"--field-selector={query.fields}")
        if self.chunk_size is not None:
            args.append(f"--chunk-size={self.chunk_size}")
        return self.items(k.resource, *args)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        args = [KINDS[kind].resource, name] + (["-n", namespace] if namespace else [])
        obj: dict[str, Any] = self.get_json(*args)
        return obj

    def can_i(self, verb: str, resource: str, namespace: str) -> bool:
        """`kubectl auth can-i`, cached per (verb, resource, namespace)."""
        key = (verb, resource, namespace)
        if key not in self._can_i:
            where = ["-n", namespace] if namespace else ["-A"]
            proc = self.run("auth", "can-i", verb, resource, *where)
            self._can_i[key] = proc.returncode == 0 and proc.stdout.strip() == "yes"
        return self._can_i[key]

    def versions(self) -> tuple[str | None, str | None, str]:
        """kubectl's own gitVersion and the server's (None where unknown), and what
        kubectl said when it could not read the server's; asked once."""
        if self._versions is None:
            proc = self.run("version", "-o", "json")
            try:
                doc = json.loads(proc.stdout or "{}")
            except json.JSONDecodeError:
                doc = {}
            found: list[str | None] = []
            for key in ("clientVersion", "serverVersion"):
                part = doc.get(key) if isinstance(doc, dict) else None
                version = part.get("gitVersion") if isinstance(part, dict) else None
                found.append(version if isinstance(version, str) else None)
            self._versions = (found[0], found[1], _one_line(proc.stderr))
        return self._versions

    def metrics(self) -> str | None:
        proc = self.run("get", "--raw", "/metrics")
        return proc.stdout if proc.returncode == 0 else None

    def default_namespace(self) -> str:
        proc = self.run("config", "view", "--minify", "-o", "jsonpath={..namespace}")
        return (proc.stdout.strip() if proc.returncode == 0 else "") or "default"
