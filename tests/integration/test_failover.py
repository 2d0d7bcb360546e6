"""Failover on a real API server: the leader is stopped in the middle of its first sync,
the standby finishes the job, and the result is exactly what `draview analyze` computes
from a dump of the world — with never two writers at once (the audit log)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from analyzed import assert_converges
from audit import audit_log, writes
from operator_helpers import DRIVER, allocate, rslice, uniq
from operator_proc import Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster

LEASE = ("--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5")


def _world(k: KubeCluster, ns: str, tag: str) -> list[str]:
    """Pools worth comparing: allocations (one shared device), shared counters and a
    taint rule, over 16 pools so that the first sync is 64 writes."""
    names = [f"{tag}-{i:02d}" for i in range(16)]
    k.create(*(rslice(n, n, [{"name": "gpu-0"}, {"name": "gpu-1"}]) for n in names[1:]))
    counters = {"mem": {"memory": "40Gi"}}
    parts = [
        {
            "name": f"part-{i}",
            "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "20Gi"}}}],
        }
        for i in range(3)
    ]
    # Since v1.35 shared counters live in a slice of their own: pool 0 has two.
    counter_slice = f"{names[0]}-counters"
    k.create(
        rslice(counter_slice, names[0], count=2, counters=counters),
        rslice(names[0], names[0], parts, count=2),
    )
    allocate(k, ns, "one", names[0], "part-0")
    allocate(k, ns, "two", names[1], "gpu-0", "gpu-1")
    allocate(k, ns, "three", names[2], "gpu-1")
    k.create(
        {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": tag},
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": names[3], "device": "gpu-0"},
                "taint": {"key": "example.com/broken", "effect": "NoSchedule"},
            },
        }
    )
    return [*names, counter_slice]


def test_sigterm_of_the_leader_mid_sync_hands_over_and_converges_to_analyze(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    log = audit_log()
    tag = uniq("failover")
    names = _world(crds, kube_namespace, tag)
    common = ("--leader-elect", "true", "--lease-namespace", kube_namespace)
    common += ("--lease-name", tag, *LEASE)
    # a: 64 writes at 4 per second, a 16 s first sync; a short shutdown flush so that
    # SIGTERM leaves work for b. b: default rate.
    slow = ("--qps", "4", "--burst", "1", "--shutdown-timeout", "1")
    a = Operator(crds.kubeconfig, (*common, "--identity", f"{tag}-a", *slow))
    b = Operator(crds.kubeconfig, (*common, "--identity", f"{tag}-b"))
    try:
        a.start(tmp_path)
        crds.wait_for("a leads", lambda: a.metric("draview_leader") == 1, timeout=60)
        b.start(tmp_path)
        crds.wait_for("b's initial list", lambda: "initial list done" in b.logs(), timeout=60)
        # Mid-sync: a has written some of its 64 requests, far from all.
        crds.wait_for(
            "a has written 12 requests",
            lambda: len(writes(log, f"draview/{tag}-a")) >= 12,
            timeout=60,
            interval=0.2,
        )
        stopped = time.monotonic()
        assert a.stop() == 0, a.logs()
        crds.wait_for("b leads", lambda: b.metric("draview_leader") == 1, timeout=30)
        took_over = time.monotonic() - stopped
        b.wait_ready(timeout=60)  # b's first sync is done
        assert_converges(crds)
        print(f"b led {took_over:.1f} s after SIGTERM to a")
    except BaseException:
        print(f"--- a:\n{a.logs()}\n--- b:\n{b.logs()}")
        raise
    finally:
        a.stop()
        b.stop()
        crds.delete("resourceslice", *names)
        crds.delete("devicetaintrule", tag)
    by_a = writes(log, f"draview/{tag}-a")
    by_b = writes(log, f"draview/{tag}-b")
    # a was stopped mid-sync, and b finished it.
    print(f"writes: a {len(by_a)}, b {len(by_b)}")
    assert 12 <= len(by_a) < 64 and by_b, (len(by_a), len(by_b))
    # One writer at any moment: every write of a ended before the API server received
    # the first of b.
    assert by_a[-1].at < by_b[0].began, (by_a[-1], by_b[0])
