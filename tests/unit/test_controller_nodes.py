"""NodeIndex: which pools a node event re-judges, and the snapshot the engine is handed."""

from __future__ import annotations

import dataclasses
from typing import Any

from draview.api.nodes import NodeInfo
from draview.api.slices import ResourceSlice
from draview.controller.nodes import NO_NODES, NodeIndex, reach_of

RACK = "topology.example.com/rack"


def _slice(pool: str, **reach: Any) -> ResourceSlice:
    return ResourceSlice.from_object(
        {
            "metadata": {"name": f"{pool}-0"},
            "spec": {
                "driver": "d.example.com",
                "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "dev-0"}],
                **reach,
            },
        }
    )


def _selector(key: str) -> dict[str, Any]:
    return {
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "Exists"}]}]
        }
    }


LOCAL = ("d.example.com", "local")
ALL = ("d.example.com", "all")
RACKED = ("d.example.com", "racked")


def _index() -> NodeIndex:
    idx = NodeIndex()
    idx.pool_changed(LOCAL, [_slice("local", nodeName="node-1")])
    idx.pool_changed(ALL, [_slice("all", allNodes=True)])
    idx.pool_changed(RACKED, [_slice("racked", **_selector(RACK))])
    return idx


def test_reach_of_names_the_label_keys_selectors_read() -> None:
    assert reach_of([_slice("p", nodeName="node-1")]) is None
    counters_only = dataclasses.replace(_slice("c", allNodes=True), devices=())
    assert reach_of([counters_only]) is None  # offers no device to any node
    all_nodes = reach_of([_slice("p", allNodes=True)])
    assert all_nodes is not None and all_nodes.keys == frozenset()
    racked = reach_of([_slice("p", **_selector(RACK)), _slice("q", nodeName="node-2")])
    assert racked is not None and racked.keys == {RACK}


def test_reach_of_per_device_selection() -> None:
    s = ResourceSlice.from_object(
        {
            "metadata": {"name": "s"},
            "spec": {
                "driver": "d.example.com",
                "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                "perDeviceNodeSelection": True,
                "devices": [
                    {"name": "a", "nodeName": "node-1"},
                    {"name": "b", **_selector("zone")},
                ],
            },
        }
    )
    r = reach_of([s])
    assert r is not None and r.keys == {"zone"}


def test_a_new_or_removed_node_rejudges_the_pools_that_reach_it() -> None:
    idx = _index()
    assert idx.put(NodeInfo("node-9", {})) == {ALL}
    assert idx.put(NodeInfo("node-8", {RACK: "a"})) == {ALL, RACKED}
    assert idx.delete("node-9") == {ALL}
    assert idx.delete("node-8") == {ALL, RACKED}  # with the labels it had
    assert idx.delete("node-9") == set()  # unknown: nothing changes


def test_a_label_change_rejudges_only_pools_that_read_the_key() -> None:
    idx = _index()
    idx.put(NodeInfo("node-1", {"kubernetes.io/hostname": "node-1"}))
    assert idx.put(NodeInfo("node-1", {"kubernetes.io/hostname": "node-1"})) == set()
    assert idx.put(NodeInfo("node-1", {"kubernetes.io/hostname": "node-1", "x": "1"})) == set()
    assert idx.put(NodeInfo("node-1", {"x": "1", RACK: "a"})) == {RACKED}
    assert idx.put(NodeInfo("node-1", {"x": "1", RACK: "b"})) == set()  # Exists either way
    assert idx.put(NodeInfo("node-1", {"x": "1"})) == {RACKED}  # removed counts too


def test_nodes_are_grouped_by_the_labels_a_pools_selectors_read_until_a_node_changes() -> None:
    idx = _index()
    idx.put(NodeInfo("node-2", {RACK: "b", "x": "1"}))
    idx.put(NodeInfo("node-3", {RACK: "a", "x": "2"}))
    idx.put(NodeInfo("node-1", {RACK: "a"}))
    first = idx.nodes_for(RACKED)
    # One entry per rack, standing for its nodes, with only the label the selector reads.
    assert [(n.name, dict(n.labels), n.members) for n in first] == [
        ("node-1", {RACK: "a"}, ("node-1", "node-3")),
        ("node-2", {RACK: "b"}, ("node-2",)),
    ]
    assert first.labels_of["node-3"] == {RACK: "a", "x": "2"}
    # allNodes reads no label: every node is alike.
    assert [n.members for n in idx.nodes_for(ALL)] == [("node-1", "node-2", "node-3")]
    other = ("d.example.com", "racked-too")
    idx.pool_changed(other, [_slice("racked-too", **_selector(RACK))])
    assert idx.nodes_for(other) is first  # grouped once for every pool reading the key
    assert idx.nodes_for(LOCAL) is NO_NODES  # named nodes need no Node objects
    idx.put(NodeInfo("node-1", {RACK: "a"}))  # no change: same groups
    assert idx.nodes_for(RACKED) is first
    idx.put(NodeInfo("node-1", {RACK: "c"}))
    again = idx.nodes_for(RACKED)
    assert again is not first and [n.members for n in again] == [
        ("node-1",),
        ("node-2",),
        ("node-3",),
    ]


def test_a_pool_whose_selectors_read_node_names_judges_every_node_alone() -> None:
    idx = NodeIndex()
    by_name = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}  # fmt: skip
    idx.pool_changed(("d.example.com", "named"), [_slice("named", nodeSelector=by_name)])
    idx.put(NodeInfo("node-1", {}))
    idx.put(NodeInfo("node-2", {}))
    nodes = idx.nodes_for(("d.example.com", "named"))
    assert [(n.name, n.members) for n in nodes] == [("node-1", ()), ("node-2", ())]


def test_a_pool_that_stops_selecting_leaves_the_index() -> None:
    idx = _index()
    idx.pool_changed(ALL, [_slice("all", nodeName="node-3")])
    assert idx.selecting() == {RACKED}
    assert idx.put(NodeInfo("node-5", {RACK: "a"})) == {RACKED}


def test_a_label_change_that_moves_a_node_between_generations_rejudges() -> None:
    """allNodes reaches the node either way; the rack selector of the newer generation
    starts to: the node's view changes although some slice reached it before too."""
    idx = NodeIndex()
    rollout = ("d.example.com", "rollout")
    idx.pool_changed(rollout, [_slice("old", allNodes=True), _slice("new", **_selector(RACK))])
    idx.put(NodeInfo("node-1", {}))
    assert idx.put(NodeInfo("node-1", {RACK: "a"})) == {rollout}
    assert idx.put(NodeInfo("node-1", {})) == {rollout}
