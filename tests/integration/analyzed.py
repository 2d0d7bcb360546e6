"""Converged, as an outsider judges it: every ResourceSliceStatus and ResourcePoolStatus
in the cluster is what `draview analyze` computes from a dump of the same world.

Compared per object: kind, name, labels, ownerReferences, spec and status. Ignored:
server metadata (uid, resourceVersion, managedFields, creationTimestamp: the API
server's, not draview's), every condition's `lastTransitionTime` (in a pool's status
and in each slice's copy of it) — the operator keeps the time a condition took its
status (possibly set by an earlier leader), while `analyze` stamps the moment it runs;
both are right — and where the profile's gates came from (the operator reads them from
the cluster, `analyze` is given the same ones as flags).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from draview.engine.profile import MATTERS, gates_from_metrics
from kubecluster import KubeCluster

# What `draview analyze` reads (the README's dump command, with the Nodes the operator
# watches: without them analyze assumes nodes, and a slice naming a node the cluster does
# not have would be judged for a node that exists) and what draview writes.
WORLD = "resourceslices,resourceclaims,devicetaintrules,nodes"
STATUS = "resourceslicestatuses,resourcepoolstatuses"

Key = tuple[str, str]  # (kind, name)
Kubectl = Callable[..., str]  # runs kubectl with these arguments, returns stdout


def _without_transition_times(value: Any) -> Any:
    """Conditions are in a pool's status and in each slice's copy of its pool's."""
    if isinstance(value, dict):
        value.pop("lastTransitionTime", None)
        for v in value.values():
            _without_transition_times(v)
    elif isinstance(value, list):
        for v in value:
            _without_transition_times(v)
    return value


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    status = _without_transition_times(copy.deepcopy(obj.get("status") or {}))
    if isinstance(status.get("profile"), dict):
        status["profile"].pop("source", None)
    return {
        "labels": meta.get("labels") or {},
        "ownerReferences": meta.get("ownerReferences") or [],
        "spec": obj.get("spec") or {},
        "status": status,
    }


def _keyed(items: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): comparable(o) for o in items}


def analyzed(dump: str, *extra: str) -> dict[Key, dict[str, Any]]:
    """What `draview analyze` computes from a JSON dump (this interpreter's draview)."""
    out = subprocess.run(
        [sys.executable, "-m", "draview.cli.main", "analyze", "-", "-o", "json", *extra],
        input=dump,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return _keyed(json.loads(out.stdout)["items"])


def written(kubectl: Kubectl) -> dict[Key, dict[str, Any]]:
    """What the cluster holds of draview's objects (kubectl names the kinds in its List)."""
    return _keyed(json.loads(kubectl("get", STATUS, "-o", "json"))["items"])


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{path}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path or '.'}: analyze {json.dumps(a)[:200]} != cluster {json.dumps(b)[:200]}"


def profile_flags(kubectl: Kubectl) -> list[str]:
    """`analyze` flags naming the cluster's own profile: its release and the DRA gates
    its API server reports (what the operator reads itself)."""
    version = json.loads(kubectl("version", "-o", "json"))["serverVersion"]["gitVersion"]
    gates = gates_from_metrics(kubectl("get", "--raw", "/metrics"))
    named = ",".join(f"{n}={str(v).lower()}" for n, v in sorted(gates.items()) if n in MATTERS)
    return ["--kubernetes-version", version, *(["--feature-gates", named] if named else [])]


def differences(kubectl: Kubectl, *extra: str, flags: list[str] | None = None) -> list[str]:
    """Every way the cluster's draview objects differ from `analyze` of a dump taken just
    before them (empty: converged), judged for the cluster's own profile. The world must
    not change meanwhile."""
    flags = profile_flags(kubectl) if flags is None else flags
    want = analyzed(kubectl("get", WORLD, "-A", "-o", "json"), *flags, *extra)
    have = written(kubectl)
    out = [f"missing {k[0]}/{k[1]}" for k in sorted(want.keys() - have.keys())]
    out += [f"extra {k[0]}/{k[1]}" for k in sorted(have.keys() - want.keys())]
    out += [
        f"{k[0]}/{k[1]} {_first_difference(want[k], have[k])}"
        for k in sorted(want.keys() & have.keys())
        if want[k] != have[k]
    ]
    return out


def assert_converges(k: KubeCluster, *extra: str, timeout: float = 60) -> None:
    """Poll until the cluster equals `analyze` of its dump; fail naming what differs."""
    deadline = time.monotonic() + timeout
    flags = profile_flags(k.check)
    while diffs := differences(k.check, *extra, flags=flags):
        if time.monotonic() > deadline:
            shown = "\n".join(diffs[:20])
            raise AssertionError(f"{len(diffs)} differences from analyze:\n{shown}")
        time.sleep(1)
