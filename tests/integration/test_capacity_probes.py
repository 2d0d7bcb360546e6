"""Capacity probes on the local control plane: definitions from a ConfigMap in the
operator's namespace, answers in CapacityProbe objects and draview_capacity_* series,
following claims as they are allocated and deleted."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_helpers import DRIVER, probes_config_map, rslice, uniq
from operator_proc import Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster


class World:
    def __init__(self, k: KubeCluster, op: Operator, ns: str, tag: str, logs: Path) -> None:
        self.k, self.op, self.ns, self.tag, self.logs = k, op, ns, tag, logs
        self.cls = f"probe-{tag}"
        self.pool = f"probe-pool-{tag}"
        self.slice = f"probe-slice-{tag}"

    def define(self, *probes: dict[str, Any], extra: str | None = None) -> None:
        config = probes_config_map(self.ns, list(probes))
        if extra is not None:
            config["data"]["broken.yaml"] = extra
        self.k.apply(config)

    def probe(self, name: str, **more: Any) -> dict[str, Any]:
        request = {"name": "dev", "exactly": {"deviceClassName": self.cls}}
        return {"name": name, "claim": {"devices": {"requests": [request]}}, **more}

    def status(self, name: str) -> dict[str, Any] | None:
        r = self.k.run("get", "capacityprobe", name, "-o", "json")
        if r.returncode != 0:
            return None
        found: dict[str, Any] = json.loads(r.stdout).get("status") or {}
        return found

    def wait_status(self, name: str, **want: Any) -> dict[str, Any]:
        seen: list[dict[str, Any] | None] = [None]

        def match() -> dict[str, Any] | None:
            s = seen[0] = self.status(name)
            return s if s is not None and all(s.get(k) == v for k, v in want.items()) else None

        try:
            return self.k.wait_for(f"capacityprobe {name} with {want}", match, timeout=30)
        except BaseException:
            print(f"last status of {name}: {seen[0]}\noperator log:\n{self.op.logs()[-3000:]}")
            raise

    def wait_metric(self, value: float, name: str, **labels: str) -> float:
        """Seconds until the operator's metric reads `value`."""
        began = time.monotonic()
        self.k.wait_for(
            f"{name}{labels} == {value}",
            lambda: self.op.metric(name, **labels) == value or None,
            timeout=30,
            interval=0.05,
        )
        return time.monotonic() - began

    def allocate(self, claim: str, device: str) -> None:
        self.k.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": claim, "namespace": self.ns},
                "spec": {
                    "devices": {
                        "requests": [{"name": "dev", "exactly": {"deviceClassName": self.cls}}]
                    }
                },
            }
        )
        result = {"request": "dev", "driver": DRIVER, "pool": self.pool, "device": device}
        patch = {"status": {"allocation": {"devices": {"results": [result]}}}}
        self.k.check(
            "patch",
            "resourceclaim",
            claim,
            "-n",
            self.ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(patch),
        )


@pytest.fixture(scope="module")
def world(crds: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    k = crds
    ns = k.create_namespace("draview-probes")
    tag = uniq("p").removeprefix("p-")
    w = World(k, Operator(k.kubeconfig), ns, tag, tmp_path_factory.mktemp("probes"))
    w.op.args = (
        "--leader-elect",
        "false",
        "--lease-namespace",
        ns,
        "--capacity-reload",
        "0.5",
    )
    # Guarded: on the other device, without the attribute, a bare lookup is a CEL error,
    # and the allocator aborts on it.
    attrs = f"device.attributes['{DRIVER}']"
    selects = f"device.driver == '{DRIVER}' && 'probe' in {attrs} && {attrs}.probe == '{tag}'"
    k.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": w.cls},
            "spec": {"selectors": [{"cel": {"expression": selects}}]},
        }
    )
    devices = [{"name": f"dev-{i}", "attributes": {"probe": {"string": tag}}} for i in range(3)]
    # A device of the same driver the class does not select: its pool does not count.
    other = rslice(f"other-{tag}", f"other-{tag}", [{"name": "dev-0"}])
    k.create(rslice(w.slice, w.pool, devices), other)
    w.op.start(w.logs)
    try:
        w.op.wait_ready()
        yield w
    finally:
        assert w.op.stop() == 0, w.op.logs()
        k.delete("resourceslice", w.slice, f"other-{tag}")
        k.delete("deviceclass", w.cls)
        k.run("delete", "capacityprobes", "-l", "app.kubernetes.io/managed-by=draview")
        k.delete_namespace(ns)


def test_a_probe_counts_the_copies_that_fit(world: World) -> None:
    w = world
    w.define(w.probe("one", minCopies=2, nodeSeries=1))
    status = w.wait_status("one", copies=3)
    assert status["maxCopies"] == 3 and status["bounded"] is False
    assert status["nodes"] == [{"name": "node-1", "copies": 3}] and status["nodeCount"] == 1
    assert status["stopped"] == "unallocatable" and status["blocker"]
    assert status["profile"].startswith("Kubernetes 1.")
    spec = w.k.get("capacityprobe", "one")["spec"]
    assert spec["source"] == f"{w.ns}/probes:probes.yaml" and spec["minCopies"] == 2
    w.wait_metric(3, "draview_capacity_fit", probe="one")
    assert w.op.metric("draview_capacity_fit_min", probe="one") == 2
    assert w.op.metric("draview_capacity_node_fit", probe="one", node="node-1") == 3


def test_the_metric_follows_claims_as_they_come_and_go(world: World) -> None:
    w = world
    w.define(w.probe("one", minCopies=2, nodeSeries=1))
    w.wait_metric(3, "draview_capacity_fit", probe="one")
    w.allocate("c-0", "dev-0")
    took = [w.wait_metric(2, "draview_capacity_fit", probe="one")]
    w.allocate("c-1", "dev-1")
    took.append(w.wait_metric(1, "draview_capacity_fit", probe="one"))
    status = w.wait_status("one", copies=1)
    assert "dev-2" not in status["blocker"]  # the free device fits: the blocker is the next
    w.k.delete("resourceclaim", "c-0", "c-1", namespace=w.ns)
    took.append(w.wait_metric(3, "draview_capacity_fit", probe="one"))
    w.wait_status("one", copies=3)
    print(f"capacity metric followed the claims after {', '.join(f'{t:.2f}' for t in took)} s")


def test_bad_definitions_lose_only_themselves(world: World) -> None:
    w = world
    missing = {"name": "from-template", "template": {"namespace": w.ns, "name": "nope"}}
    w.define(w.probe("one"), missing, extra="- name: Bad_Name\n  claim: {}\n")
    status = w.wait_status("from-template")
    assert 'resourceclaimtemplate "nope" not found' in status["error"], status
    assert "copies" not in status
    w.wait_metric(2, "draview_capacity_probe_errors")
    w.wait_metric(3, "draview_capacity_fit", probe="one")
    assert "Bad_Name" in w.op.logs()
    assert w.status("bad-name") is None


def test_a_changed_definition_and_a_removed_probe(world: World) -> None:
    w = world
    w.define(w.probe("one"), w.probe("capped", maxCopies=1))
    status = w.wait_status("capped", copies=1)
    assert status["bounded"] is True and status["stopped"] == "count"
    w.wait_metric(1, "draview_capacity_fit_bounded", probe="capped")
    w.define(w.probe("one"))
    w.k.wait_for("capped deleted", lambda: w.status("capped") is None or None, timeout=30)
    w.wait_metric(0, "draview_capacity_fit", probe="capped")  # absent: 0
    assert 'probe="capped"' not in w.op.get("/metrics")[1]
    # An object edited by hand gets the definition back.
    patch = json.dumps({"spec": {"minCopies": 99}})
    w.k.check("patch", "capacityprobe", "one", "--type=merge", "-p", patch)
    assert w.op.stop() == 0, w.op.logs()
    w.op.start(w.logs)
    w.op.wait_ready()
    w.k.wait_for(
        "the spec put back",
        lambda: "minCopies" not in w.k.get("capacityprobe", "one")["spec"] or None,
        timeout=30,
    )
