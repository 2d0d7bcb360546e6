"""A 429 storm on a real API server: the operator's writes are rejected over and over,
it waits at least what each Retry-After asks, and it still converges to what
`draview analyze` computes.

How the storm is made: v1.36 runs API Priority and Fairness, under which the inflight
limits only size the total concurrency and system:masters (the admin kubeconfig) is
exempt. So the operator runs as a ServiceAccount, and a FlowSchema sends its draview.io
writes to a priority level of their own with one share of seats (a few seats of ~600)
that rejects at once (limitResponse Reject) — against 64 writes in flight. APF's
Retry-After starts at 1 s and grows while rejections go on (e2e/cluster/README.md).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from analyzed import assert_converges
from audit import Write, audit_log, writes
from operator_helpers import rslice, uniq
from operator_proc import Operator
from test_rbac import token_kubeconfig

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster

FLOWCONTROL = "flowcontrol.apiserver.k8s.io/v1"
DEVICES = [{"name": "gpu-0"}, {"name": "gpu-1"}]


def _throttle(ns: str, sa: str, name: str) -> list[dict[str, object]]:
    level = {
        "apiVersion": FLOWCONTROL,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 1,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    }
    schema = {
        "apiVersion": FLOWCONTROL,
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": name},
            "matchingPrecedence": 10,  # before every suggested schema but exempt and probes
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [
                        {"kind": "ServiceAccount", "serviceAccount": {"name": sa, "namespace": ns}}
                    ],
                    "resourceRules": [
                        {
                            "verbs": ["create", "update", "patch", "delete"],
                            "apiGroups": ["draview.io"],
                            "resources": ["*"],
                            "clusterScope": True,
                        }
                    ],
                }
            ],
        },
    }
    return [level, schema]


@pytest.fixture
def throttled(crds: KubeCluster, kube_namespace: str, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for a ServiceAccount (cluster-admin, but not system:masters) whose
    draview.io writes go through a tiny rejecting priority level."""
    sa = uniq("storm")
    crds.check("create", "serviceaccount", sa, "-n", kube_namespace)
    crds.check(
        "create",
        "clusterrolebinding",
        sa,
        "--clusterrole=cluster-admin",
        f"--serviceaccount={kube_namespace}:{sa}",
    )
    crds.create(*_throttle(kube_namespace, sa, sa))
    try:
        yield token_kubeconfig(crds, kube_namespace, sa, tmp_path / "storm.kubeconfig")
    finally:
        crds.delete("flowschema", sa)
        crds.delete("prioritylevelconfiguration", sa)
        crds.delete("clusterrolebinding", sa)


def _waits(logs: str) -> list[tuple[float, float]]:
    """(retry_after, retry_in) of every logged failure that carried a Retry-After."""
    out = []
    for line in logs.splitlines():
        if "status write failed" not in line or "retry_after=" not in line:
            continue
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        out.append((float(fields["retry_after"]), float(fields["retry_in"])))
    return out


def _gaps_after_429(ws: list[Write]) -> list[float]:
    """Per object, seconds from each 429 to the next request for it (as the API server
    saw them: end of the rejected one, receipt of the next). A create rejected before
    its body was read has no name in the audit log: those are left out."""
    last: dict[tuple[str, str], dt.datetime] = {}
    gaps = []
    for w in sorted(ws, key=lambda w: w.began):
        key = (w.resource, w.name)
        if not w.name:
            continue
        if key in last:
            gaps.append((w.began - last.pop(key)).total_seconds())
        if w.code == 429:
            last[key] = w.at
    return gaps


def test_a_429_storm_is_ridden_out_honouring_retry_after(
    crds: KubeCluster, throttled: Path, tmp_path: Path
) -> None:
    log = audit_log()
    tag = uniq("storm")
    names = [f"{tag}-{i:02d}" for i in range(30)]
    crds.apply(*(rslice(n, n, DEVICES) for n in names))  # applied again below
    # Every failure logged (debug) with its Retry-After and the wait chosen.
    args = ("--leader-elect", "false", "--identity", tag, "--log-level", "debug")
    op = Operator(str(throttled), args)
    began = time.monotonic()
    try:
        op.start(tmp_path)
        op.wait_ready(timeout=240)
        # APF's Retry-After grows to ~16 s in this storm, and each object's own backoff
        # doubles up to 60 s: a few minutes at worst.
        assert_converges(crds, timeout=300)
        # A second storm, of writes that name their objects. A create rejected before its
        # body was read does not say which object it was for, and the first storm may
        # reject nothing else; every status exists now, so each rejected update names the
        # object the server's account below follows to its retry.
        crds.apply(*(rslice(n, n, [*DEVICES, {"name": "gpu-2"}], generation=2) for n in names))
        assert_converges(crds, timeout=300)
        took = time.monotonic() - began
        rejected = op.metric("dra_resourceslice_status_update_errors_total", code="429")
    except BaseException:
        print(op.logs()[-20000:])
        raise
    finally:
        assert op.stop() == 0, op.logs()[-5000:]
        crds.delete("resourceslice", *names)
    waits = _waits(op.logs())
    print(f"converged in {took:.0f} s after {rejected:.0f} 429s")
    print(f"Retry-After seen: {sorted({a for a, _ in waits})}")
    assert rejected >= 10, "no storm: the priority level did not reject"
    assert len(waits) == rejected, "every 429 is logged with its Retry-After"
    # The operator's own account: never a wait shorter than the server asked for.
    assert all(wait >= after for after, wait in waits), [w for w in waits if w[1] < w[0]]
    # The server's account: no object was retried sooner than 1 s (APF's smallest
    # Retry-After) after a 429; a little slack for the two clocks of one request.
    gaps = _gaps_after_429(writes(log, f"draview/{tag}"))
    assert gaps, "no rejected write named its object: the second storm did not happen"
    assert min(gaps) >= 0.95, sorted(gaps)[:5]
