"""ConsistentAcrossNodes: which generation which nodes see, from the pool's node views."""

from __future__ import annotations

from typing import Any

from draview.api.node_info import NodeInfo
from draview.api.slices import ResourceSlice
from draview.engine.consistency import node_views_condition
from draview.engine.pool import prepare_pool

RACK = "topology.example.com/rack"
KEY = ("tpu.example.com", "rack-a")


def _slice(name: str, generation: int, **reach: Any) -> ResourceSlice:
    return ResourceSlice.from_object(
        {
            "metadata": {"name": name},
            "spec": {
                "driver": KEY[0],
                "pool": {"name": KEY[1], "generation": generation, "resourceSliceCount": 1},
                "devices": [{"name": f"{name}-dev"}],
                **reach,
            },
        }
    )


RACKED = {
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": RACK, "operator": "In", "values": ["a"]}]}
        ]
    }
}
ROLLOUT = [_slice("new", 3, **RACKED), _slice("old", 2, allNodes=True)]


def _condition(slices: list[ResourceSlice], nodes: list[NodeInfo], unreachable: int = 0) -> Any:
    prepared = prepare_pool(KEY, slices, nodes)
    return node_views_condition(prepared.views, prepared.flat, unreachable)


def test_a_partial_rollout_names_which_nodes_see_which_generation() -> None:
    nodes = [NodeInfo("node-1"), NodeInfo("node-2", {RACK: "a"}), NodeInfo("node-3", {RACK: "a"})]
    cond = _condition(ROLLOUT, nodes)
    assert (cond["status"], cond["reason"]) == ("False", "NodeViewsDiffer")
    assert cond["message"] == (
        "generation 3, complete and valid, 1 slice(s) expected on 2 nodes (node-2, node-3); "
        "generation 2, complete and valid, 1 slice(s) expected on 1 node (node-1)"
    )


def test_every_node_alike_names_no_count() -> None:
    nodes = [NodeInfo(f"node-{i}", {RACK: "a"}) for i in range(5)]
    cond = _condition(ROLLOUT, nodes)
    assert (cond["status"], cond["reason"]) == ("True", "SameView")
    assert cond["message"] == (
        "every node that reaches the pool sees generation 3, complete and valid, "
        "1 slice(s) expected"
    )
    more = _condition(ROLLOUT, [*nodes, NodeInfo("node-9", {RACK: "a"})])
    assert more == cond  # a node joining rewrites nothing


def test_many_nodes_are_counted_and_a_few_named() -> None:
    nodes = [NodeInfo(f"node-{i:02}") for i in range(10)] + [NodeInfo("r", {RACK: "a"})]
    cond = _condition(ROLLOUT, nodes)
    assert "on 10 nodes (node-00, node-01, node-02 and 7 more)" in cond["message"]


def test_no_node_reaches_the_pool() -> None:
    cond = _condition([_slice("new", 3, **RACKED)], [NodeInfo("node-1")], unreachable=1)
    assert (cond["status"], cond["reason"]) == ("False", "NoNodeReaches")
    assert cond["message"] == "no node reaches the pool; 1 device(s) reachable by no node"


def test_unreachable_devices_beside_one_view() -> None:
    cond = _condition(ROLLOUT, [NodeInfo("node-1")], unreachable=1)
    assert (cond["status"], cond["reason"]) == ("False", "DevicesUnreachable")
