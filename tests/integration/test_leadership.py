"""Leadership on a real API server, judged by its audit log (e2e/cluster/up records
every draview.io write with the writer's user agent, `draview/<identity>`): never two
writers, even during a first sync many leases long or after the leader was paused."""

from __future__ import annotations

import datetime as dt
import signal
import time
from pathlib import Path

import pytest
from audit import audit_log, now, writes
from operator_helpers import rslice, slice_status, uniq
from operator_proc import Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster

# Short timings so that the tests take seconds: a lease of 3 s, renewed every 0.5 s.
LEASE = ("--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5")


def replica(k: KubeCluster, ns: str, lease: str, identity: str, *extra: str) -> Operator:
    args = ("--leader-elect", "true", "--lease-namespace", ns, "--lease-name", lease)
    return Operator(k.kubeconfig, (*args, *LEASE, "--identity", identity, *extra))


def leads(op: Operator) -> bool:
    return op.metric("draview_leader") == 1


def test_a_first_sync_longer_than_three_leases_has_one_writer(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    log = audit_log()
    tag = uniq("ha")
    names = [f"{tag}-{i}" for i in range(20)]
    crds.create(*(rslice(n, n, [{"name": "gpu-0"}]) for n in names))
    # 20 new pools are 80 writes: at 4 per second the first sync lasts ~20 s, more than
    # six lease durations, during which the leader must keep its lease.
    slow = ("--qps", "4", "--burst", "1")
    a = replica(crds, kube_namespace, tag, f"{tag}-a", *slow).start(tmp_path)
    b = replica(crds, kube_namespace, tag, f"{tag}-b", *slow)
    try:
        crds.wait_for("replica a leads", lambda: leads(a), timeout=60)
        began = time.monotonic()
        b.start(tmp_path)
        a.wait_ready(timeout=180)  # ready once its first sync has written everything
        synced_in = time.monotonic() - began
        assert synced_in >= 3 * 3, "the first sync must outlast three leases"
        b.wait_ready()
        assert leads(a) and not leads(b)
        assert a.stop() == 0  # releases the lease: b takes over at once
        crds.wait_for("replica b leads", lambda: leads(b), timeout=30)
        crds.create(rslice(f"{tag}-late", f"{tag}-late", [{"name": "gpu-0"}]))
        crds.wait_for("b writes", lambda: slice_status(crds, f"{tag}-late"), timeout=30)
    finally:
        a.stop()
        b.stop()
        crds.delete("resourceslice", *names, f"{tag}-late")
    by_a = writes(log, f"draview/{tag}-a")
    by_b = writes(log, f"draview/{tag}-b")
    assert len(by_a) >= 80 and by_b
    # One writer at any moment: every write of a ended before the first of b.
    assert by_a[-1].at < by_b[0].at, (by_a[-1], by_b[0])


def test_a_leader_paused_past_its_lease_writes_nothing_after_it_resumes(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    log = audit_log()
    tag = uniq("pause")
    a = replica(crds, kube_namespace, tag, f"{tag}-a", "--qps", "2", "--burst", "1")
    b = replica(crds, kube_namespace, tag, f"{tag}-b")
    names = [f"{tag}-{i}" for i in range(6)]
    try:
        a.start(tmp_path)
        crds.wait_for("replica a leads", lambda: leads(a), timeout=60)
        a.wait_ready(timeout=120)
        b.start(tmp_path).wait_ready()
        # 24 writes at 2 per second: a is in the middle of them when it is paused.
        crds.create(*(rslice(n, n, [{"name": "gpu-0"}]) for n in names))
        crds.wait_for("a has started writing", lambda: writes(log, f"draview/{tag}-a"))
        assert a.proc is not None
        a.proc.send_signal(signal.SIGSTOP)
        paused_at = now()
        try:
            crds.wait_for("replica b leads", lambda: leads(b), timeout=30)
            time.sleep(3)  # paused for well over a lease
        finally:
            a.proc.send_signal(signal.SIGCONT)
        for n in names:
            crds.wait_for(f"{n} written", lambda n=n: slice_status(crds, n), timeout=60)
        time.sleep(3)  # every chance for a to write what it had queued
        assert not leads(a)
        assert "lost leadership" in a.logs()
    finally:
        a.stop()
        b.stop()
        crds.delete("resourceslice", *names)
    # A request sent just before the pause may still finish on the server: allow 1 s.
    grace = paused_at + dt.timedelta(seconds=1)
    late = [w for w in writes(log, f"draview/{tag}-a") if w.at > grace]
    assert not late, late
    assert writes(log, f"draview/{tag}-b")
