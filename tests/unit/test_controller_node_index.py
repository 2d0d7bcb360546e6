"""NodeIndex: which pools a node event re-judges, and the snapshot the engine is handed."""

from __future__ import annotations

import dataclasses
from typing import Any

from draview.api.node_info import NodeInfo
from draview.api.slices import ResourceSlice
from draview.controller.node_index import NO_NODES, NodeIndex, reach_of, reads_node_status
from draview.engine.model import EngineOptions
from draview.engine.pool import compute_pool
from draview.engine.profile import all_gates_on, make_profile, parse_release

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


# Optional node operations (1.37): what nodes declare, read only from whole Nodes.

SKIPPING = ("d.example.com", "skipping")
FEATURE = "DRAOptionalNodeOperations"
WITH_FEATURE = make_profile("1.37", {FEATURE: True})


def _node(name: str, *declared: str, labels: dict[str, str] | None = None) -> NodeInfo:
    return NodeInfo(name, labels or {}, (), frozenset(declared))


def _skipping_state(idx: NodeIndex, slices: list[ResourceSlice]) -> tuple[str, str | None]:
    result = compute_pool(
        SKIPPING,
        slices,
        options=EngineOptions(profile=WITH_FEATURE),
        nodes=idx.nodes_for(SKIPPING),
    )
    (device,) = result.slices[0].status["devices"]
    return device["state"], device.get("stateReason")


def test_only_1_37_with_optional_node_operations_reads_node_status() -> None:
    assert reads_node_status(WITH_FEATURE)
    assert not reads_node_status(make_profile("1.37"))  # the gate is alpha: off
    # The experimental allocator without the gate refuses such devices on every node.
    assert not reads_node_status(make_profile("1.37", {"DRADeviceCompatibilityGroups": True}))
    assert not reads_node_status(all_gates_on(parse_release("1.36")))


def test_a_node_that_starts_declaring_the_feature_rejudges_the_pools_naming_it() -> None:
    idx = _index()
    slices = [_slice("skipping", nodeName="node-1", skipNodeOperations=["*"])]
    idx.pool_changed(SKIPPING, slices)
    # New: the pools reaching it, the one naming it with skipNodeOperations (not LOCAL).
    assert idx.put(_node("node-1")) == {SKIPPING, ALL}
    assert _skipping_state(idx, slices) == ("Unavailable", "NodeLacksOptionalNodeOperations")
    assert idx.put(_node("node-1")) == set()  # nothing changed
    # Only the feature changes: the pool naming the node and those selecting it.
    assert idx.put(_node("node-1", FEATURE)) == {SKIPPING, ALL}
    assert _skipping_state(idx, slices) == ("Available", None)
    assert idx.delete("node-1") == {SKIPPING, ALL}
    # A named node without a Node object, where statuses are known, declares nothing.
    idx.put(_node("node-2", FEATURE))
    assert _skipping_state(idx, slices) == ("Unavailable", "NodeLacksOptionalNodeOperations")


def test_a_pool_that_stops_skipping_node_operations_is_not_rejudged_by_features() -> None:
    idx = NodeIndex()
    idx.pool_changed(SKIPPING, [_slice("skipping", nodeName="node-1", skipNodeOperations=["*"])])
    idx.put(_node("node-1"))
    idx.pool_changed(SKIPPING, [_slice("skipping", nodeName="node-1")])
    assert idx.put(_node("node-1", FEATURE)) == set()
    assert idx.nodes_for(SKIPPING) is NO_NODES


def test_selecting_pools_see_nodes_grouped_by_what_they_declare() -> None:
    idx = NodeIndex()
    slices = [_slice("skipping", allNodes=True, skipNodeOperations=["*"])]
    idx.pool_changed(SKIPPING, slices)
    idx.put(_node("node-1"))
    idx.put(_node("node-2"))
    assert _skipping_state(idx, slices) == ("Unavailable", "NodeLacksOptionalNodeOperations")
    assert idx.put(_node("node-2", FEATURE)) == {SKIPPING}
    assert _skipping_state(idx, slices) == ("Available", None)


def test_with_metadata_only_nothing_about_features_changes() -> None:
    """Nodes without a status (metadata watches): taken to declare what a slice needs,
    and a pool that names its nodes keeps the empty snapshot through node events."""
    idx = NodeIndex()
    slices = [_slice("skipping", nodeName="node-1", skipNodeOperations=["*"])]
    idx.pool_changed(SKIPPING, slices)
    # The node's coming and going does not re-judge the pool naming it: its judgement
    # reads no node then.
    assert idx.put(NodeInfo("node-1", {RACK: "a"})) == set()
    assert idx.put(NodeInfo("node-1", {RACK: "b"})) == set()
    assert idx.nodes_for(SKIPPING) is NO_NODES
    assert _skipping_state(idx, slices) == ("Available", None)
    assert idx.delete("node-1") == set()
