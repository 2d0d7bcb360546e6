"""Operator tests that must not share the cluster with another running operator: who
writes, and what Kubernetes does on its own (garbage collection), are what they check."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from operator_helpers import allocate, rslice, slice_status, uniq, wait_states
from operator_proc import Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster


def test_two_replicas_one_writer_and_failover(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    lease = uniq("lease")
    args = ("--leader-elect", "true", "--lease-namespace", kube_namespace, "--lease-name", lease)
    a = Operator(crds.kubeconfig, (*args, "--identity", "replica-a")).start(tmp_path)
    a.wait_ready()
    b = Operator(crds.kubeconfig, (*args, "--identity", "replica-b")).start(tmp_path)
    pool, name = uniq("pool"), uniq("slice")
    try:
        b.wait_ready()
        assert (a.metric("draview_leader"), b.metric("draview_leader")) == (1, 0)
        crds.create(rslice(name, pool, [{"name": "gpu-0"}]))
        wait_states(crds, name, {"gpu-0": ("Available", None)})
        assert b.metric("draview_api_writes_total") == 0  # the follower never writes
        assert a.metric("draview_api_writes_total") > 0
        assert a.stop() == 0  # releases the lease on SIGTERM
        crds.wait_for("replica-b leads", lambda: b.metric("draview_leader") == 1, timeout=30)
        crds.create(rslice(f"{name}-2", pool, [{"name": "gpu-1"}], count=1))
        crds.wait_for("new leader writes", lambda: slice_status(crds, f"{name}-2"), timeout=30)
    finally:
        a.stop()
        b.stop()
        crds.delete("resourceslice", name, f"{name}-2")


def test_periodic_relists_put_right_what_others_changed_and_keep_every_claim_change(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    """A re-list every second, each followed by a full sync that reads every status object
    back while claim changes go on (controller/worker.py: only the first sync of a
    leadership holds off the batches): a status edited behind the operator's back is put
    right, and every claim change arrives, none undone by a page read before its write."""
    pool, name = uniq("pool"), uniq("slice")
    devices = [f"gpu-{i}" for i in range(4)]
    crds.create(rslice(name, pool, [{"name": d} for d in devices]))
    args = ("--leader-elect", "false", "--resync-interval", "1")
    op = Operator(crds.kubeconfig, args).start(tmp_path)
    try:
        op.wait_ready()
        free = {d: ("Available", None) for d in devices}
        wait_states(crds, name, free)
        edit = [{"op": "replace", "path": "/status/devices/0/state", "value": "Allocated"}]
        crds.check(
            "patch", "resourceslicestatus", name, "--subresource=status", "--type=json",
            "-p", json.dumps(edit),
        )  # fmt: skip
        wait_states(crds, name, free)  # only a periodic sync reads it back
        for i, d in enumerate(devices[1:]):
            allocate(crds, kube_namespace, f"relist-{i}", pool, d)
        wait_states(crds, name, {**free, **{d: ("Allocated", None) for d in devices[1:]}})
        crds.delete("resourceclaim", "relist-0", namespace=kube_namespace)
        wait_states(crds, name, {**free, **{d: ("Allocated", None) for d in devices[2:]}})
    finally:
        assert op.stop() == 0, op.logs()
        crds.delete("resourceslice", name)


def test_slice_status_is_garbage_collected_with_its_slice(
    crds: KubeCluster, tmp_path: Path
) -> None:
    """With no operator running, Kubernetes' garbage collector alone removes the status
    object through its ownerReference."""
    pool, name = uniq("pool"), uniq("slice")
    crds.create(rslice(name, pool, [{"name": "gpu-0"}]))
    op = Operator(crds.kubeconfig, ("--leader-elect", "false")).start(tmp_path)
    try:
        op.wait_ready()
        wait_states(crds, name, {"gpu-0": ("Available", None)})
    finally:
        assert op.stop() == 0
    crds.delete("resourceslice", name)
    crds.wait_for("garbage collection", lambda: slice_status(crds, name) is None, timeout=60)


def test_pending_claim_gets_one_event_saying_why(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    cls = uniq("nothing-matches")
    crds.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": cls},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "no.such.driver"'}}]},
        }
    )
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "stuck", "namespace": kube_namespace},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": cls}}]}},
    }
    crds.create(claim)
    args = ("--leader-elect", "false", "--pending-threshold", "1", "--explain-interval", "1")
    op = Operator(crds.kubeconfig, args).start(tmp_path)
    try:
        op.wait_ready()

        def events() -> list[dict[str, Any]] | None:
            out = json.loads(
                crds.check(
                    "get",
                    "events",
                    "-n",
                    kube_namespace,
                    "-o",
                    "json",
                    "--field-selector=reason=DRAViewUnallocatable",
                )
            )["items"]
            return out or None

        found = crds.wait_for("an Event on the pending claim", events, timeout=60)
        assert found[0]["involvedObject"]["name"] == "stuck"
        assert found[0]["type"] == "Warning" and found[0]["message"]
        time.sleep(3)  # several more explain rounds: the explanation did not change
        again = events() or []
        assert len(again) == 1 and again[0].get("count", 1) == found[0].get("count", 1)
    finally:
        assert op.stop() == 0, op.logs()
        crds.delete("deviceclass", cls)
