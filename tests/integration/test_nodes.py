"""The operator watches Nodes: relabelling nodes changes which slices reach them.

A pool whose generation 2 selects `rack=<value>` while generation 1 is `allNodes`: the
allocator gathers pools per node, so on a node without the label only generation 1 is
seen and its device is allocatable; once every node carries the label, every node sees
generation 2 and the generation 1 device is stale everywhere.
"""

from __future__ import annotations

import time

import pytest
from operator_helpers import DRIVER, declare_features, device_states, uniq
from operator_proc import Operator

from kubecluster import KubeCluster

pytestmark = pytest.mark.cluster

LABEL = "topology.example.com/rack"
NODES = ("node-1", "node-2", "node-3")  # the fake nodes e2e/cluster/up registers


def _slice(name: str, pool: str, generation: int, device: str, reach: dict[str, object]) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": [{"name": device}],
            **reach,
        },
    }


def _label(k: KubeCluster, value: str | None) -> None:
    arg = f"{LABEL}={value}" if value is not None else f"{LABEL}-"
    k.check("label", "node", *NODES, arg, "--overwrite")


def _wait(k: KubeCluster, name: str, want: tuple[str, str | None]) -> float:
    """Seconds until the slice's one device shows `want` (polled every 50 ms)."""
    start = time.monotonic()
    k.wait_for(
        f"{name} -> {want}",
        lambda: want in (device_states(k, name) or {}).values() or None,
        timeout=30,
        interval=0.05,
    )
    return time.monotonic() - start


def _rollout(k: KubeCluster, value: str) -> tuple[str, str]:
    """Generation 1 for all nodes, generation 2 for nodes labelled `value`: the slices."""
    pool, old, new = uniq("rack-pool"), uniq("gen1"), uniq("gen2")
    term = {"matchExpressions": [{"key": LABEL, "operator": "In", "values": [value]}]}
    k.create(
        _slice(old, pool, 1, "dev-old", {"allNodes": True}),
        _slice(new, pool, 2, "dev-new", {"nodeSelector": {"nodeSelectorTerms": [term]}}),
    )
    return old, new


def test_relabelling_nodes_rejudges_the_pool(operator: Operator, crds: KubeCluster) -> None:
    value = uniq("rack")
    old, new = _rollout(crds, value)
    try:
        # No node carries the label: every node sees only generation 1.
        _wait(crds, old, ("Available", None))
        _wait(crds, new, ("Unavailable", "Unreachable"))

        _label(crds, value)
        stale = _wait(crds, old, ("Unavailable", "StaleGeneration"))
        _wait(crds, new, ("Available", None))

        _label(crds, None)
        back = _wait(crds, old, ("Available", None))
        _wait(crds, new, ("Unavailable", "Unreachable"))
        # The latency is reported, not asserted (figures belong in bench/).
        print(f"label -> stale {stale:.2f} s, unlabel -> available {back:.2f} s")
    finally:
        _label(crds, None)
        crds.delete("resourceslice", old, new)


def test_a_node_that_appears_is_a_new_view(operator: Operator, crds: KubeCluster) -> None:
    """A node created with the label makes the selecting generation reach a node: the
    generation 1 device stays allocatable on the other nodes, the generation 2 one
    becomes reachable; deleting the node makes it unreachable again."""
    value, node = uniq("rack"), uniq("node")
    old, new = _rollout(crds, value)
    try:
        _wait(crds, new, ("Unavailable", "Unreachable"))
        crds.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "labels": {LABEL: value}},
            }
        )
        _wait(crds, new, ("Available", None))
        _wait(crds, old, ("Available", None))  # node-1..3 still see only generation 1
        crds.delete("node", node)
        _wait(crds, new, ("Unavailable", "Unreachable"))
    finally:
        crds.run("delete", "node", node, "--ignore-not-found")
        crds.delete("resourceslice", old, new)


FEATURE = "DRAOptionalNodeOperations"


def test_what_a_node_declares_decides_devices_that_skip_node_operations(
    operator: Operator, crds: KubeCluster
) -> None:
    """1.37 with DRAOptionalNodeOperations (this cluster's gates): the scheduler hands out
    a device of a slice with skipNodeOperations only on a node whose status declares the
    feature. The operator reads whole Nodes for it (metadata leaves the status out), and
    a node that starts or stops declaring it re-judges the pool naming it."""
    name, node = uniq("skipping"), NODES[0]
    body = _slice(name, uniq("skip-pool"), 1, "dev-0", {"nodeName": node})
    body["spec"]["skipNodeOperations"] = ["*"]
    crds.create(body)
    try:
        _wait(crds, name, ("Unavailable", "NodeLacksOptionalNodeOperations"))
        declare_features(crds, node, FEATURE)
        _wait(crds, name, ("Available", None))
        declare_features(crds, node)
        _wait(crds, name, ("Unavailable", "NodeLacksOptionalNodeOperations"))
    finally:
        declare_features(crds, node)
        crds.delete("resourceslice", name)
