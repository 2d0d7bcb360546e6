"""Nodes as the allocator needs them, and which pools a node event can change.

The allocator gathers every pool per node: a slice reaches a node by nodeName, allNodes,
a node selector, or per device. A pool whose slices only name nodes is judged from the
nodes they name, whatever Node objects exist, so a node event re-judges only the pools
that select: an added or removed node, every pool with an allNodes or selector slice;
a label change, only the pools whose selectors read one of the changed keys.

Only names and labels are kept (from metadata-only watches), label strings interned: a
thousand nodes share a few hundred distinct keys and values.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from draview.api.common import NodeSelector
from draview.api.nodes import NodeInfo
from draview.api.slices import ResourceSlice
from draview.engine.model import PoolKey

NO_NODES: tuple[NodeInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class Reach:
    """How a pool's slices choose nodes: by the node set (allNodes, selectors), and by
    which label keys (matchExpressions; matchFields only read the node's name)."""

    keys: frozenset[str]


def _keys(sel: NodeSelector) -> set[str]:
    return {r.key for t in sel.node_selector_terms for r in t.match_expressions}


def reach_of(slices: Iterable[ResourceSlice]) -> Reach | None:
    """None when every slice (and device) names its node: no Node object matters."""
    selects = False
    keys: set[str] = set()
    for s in slices:
        if s.node_name:
            continue
        if s.all_nodes or s.node_selector is not None:
            selects = True
            if s.node_selector is not None:
                keys |= _keys(s.node_selector)
        elif s.per_device_node_selection:
            for d in s.devices:
                if not d.node_name and (d.all_nodes or d.node_selector is not None):
                    selects = True
                    if d.node_selector is not None:
                        keys |= _keys(d.node_selector)
    return Reach(frozenset(keys)) if selects else None


class NodeIndex:
    """Every node's name and labels, the pools that select nodes, and one sorted snapshot
    of the nodes shared by every judgement until a node changes (the engine keeps a
    pool's node views while it is handed the very same snapshot)."""

    def __init__(self) -> None:
        self._labels: dict[str, Mapping[str, str]] = {}
        self._reach: dict[PoolKey, Reach] = {}
        self._snapshot: tuple[NodeInfo, ...] | None = NO_NODES

    def __len__(self) -> int:
        return len(self._labels)

    def names(self) -> set[str]:
        return set(self._labels)

    def put(self, node: NodeInfo) -> set[PoolKey]:
        """A node added or changed; the pools whose judgement it may change."""
        old = self._labels.get(node.name)
        labels = {sys.intern(k): sys.intern(v) for k, v in node.labels.items()}
        if old == labels:
            return set()
        self._labels[node.name] = labels
        self._snapshot = None
        if old is None:
            return set(self._reach)
        changed = {k for k in old.keys() | labels.keys() if old.get(k) != labels.get(k)}
        return {key for key, r in self._reach.items() if r.keys & changed}

    def delete(self, name: str) -> set[PoolKey]:
        if self._labels.pop(name, None) is None:
            return set()
        self._snapshot = None
        return set(self._reach)

    def pool_changed(self, key: PoolKey, slices: Iterable[ResourceSlice]) -> None:
        """Call whenever a pool's slices change."""
        reach = reach_of(slices)
        if reach is None:
            self._reach.pop(key, None)
        else:
            self._reach[key] = reach

    def selecting(self) -> set[PoolKey]:
        return set(self._reach)

    def nodes_for(self, key: PoolKey) -> Sequence[NodeInfo]:
        """The nodes to judge `key` from: every node for a pool that selects, none for
        one whose slices name their nodes (its views do not depend on them, and the
        same empty snapshot keeps its prepared views through node events)."""
        if key not in self._reach:
            return NO_NODES
        if self._snapshot is None:
            self._snapshot = tuple(
                NodeInfo(name, self._labels[name]) for name in sorted(self._labels)
            )
        return self._snapshot
