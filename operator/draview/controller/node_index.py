"""Nodes as the allocator needs them, and which pools a node event can change.

The allocator gathers every pool per node: a slice reaches a node by nodeName, allNodes,
a node selector, or per device. A pool whose slices only name nodes is judged from the
nodes they name, whatever Node objects exist; and a node's view of a pool depends on
that node's labels alone. So a node event re-judges only the pools that offer that node
devices before or after it: an added or removed node, the pools whose allNodes or
selector slices reach it; a label change, the pools whose selectors read a changed key
and now answer differently for the node.

Only names and labels are kept (from metadata-only watches), label strings interned: a
thousand nodes share a few hundred distinct keys and values. Where the profile's scheduler
reads the features a node declares (1.37, DRAOptionalNodeOperations), whole Nodes are
watched and those are kept too: then a pool with a slice that skips node operations
depends on the nodes it names as well, and a change of what a node declares re-judges
the pools that offer it devices.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from draview.api.common import NodeSelector
from draview.api.node_info import NodeGroups, NodeInfo, assumed_nodes
from draview.api.slices import ResourceSlice
from draview.engine.model import PoolKey
from draview.engine.node_match import selector_matches
from draview.engine.profile import Profile
from draview.engine.rules import rules_for

NO_NODES: tuple[NodeInfo, ...] = ()


def reads_node_status(profile: Profile) -> bool:
    """Whether the profile's scheduler reads `status.declaredFeatures`: only 1.37's
    experimental allocator with optional node operations on (with them off, a device
    that skips node operations is refused on every node alike)."""
    rules = rules_for(profile)
    return rules.node_operations_checked and rules.optional_node_operations


def _named_skipping(slices: Iterable[ResourceSlice]) -> frozenset[str]:
    """The nodes named by slices (or their devices) that skip node operations: whether
    those nodes declare the feature decides the pool's devices there."""
    skipping = [s for s in slices if s.skip_node_operations]
    return frozenset(n.name for n in assumed_nodes(skipping)) if skipping else frozenset()


Selector = NodeSelector | None  # None: allNodes


@dataclass(frozen=True, slots=True)
class Reach:
    """How a pool's device-bearing slices (or devices) choose nodes other than by name:
    the distinct selectors (None for allNodes), and the label keys they read."""

    selectors: tuple[Selector, ...]
    keys: frozenset[str]
    # The label keys that tell nodes apart for this pool: read by any selector of any of
    # its slices (counter slices too: from 1.37 they reach only the nodes they select);
    # None when one reads a node's name (matchFields), so that every node is its own.
    group_by: tuple[str, ...] | None = ()

    def matching(self, name: str, labels: Mapping[str, str]) -> tuple[bool, ...]:
        """Which of the selectors reach the node: its view of the pool follows from it."""
        return tuple(sel is None or selector_matches(sel, name, labels) for sel in self.selectors)

    def reaches(self, name: str, labels: Mapping[str, str]) -> bool:
        return any(self.matching(name, labels))


def reach_of(slices: Iterable[ResourceSlice]) -> Reach | None:
    """None when every device names its node: no Node object matters to the pool.
    Slices without devices (counter sets) are left out: a node that reaches only them
    is offered nothing, so its coming and going changes no judgement."""
    selectors: dict[Selector, None] = {}
    for s in slices:
        if s.node_name or not s.devices:
            continue
        if s.all_nodes or s.node_selector is not None:
            selectors[None if s.all_nodes else s.node_selector] = None
        elif s.per_device_node_selection:
            for d in s.devices:
                if not d.node_name and (d.all_nodes or d.node_selector is not None):
                    selectors[None if d.all_nodes else d.node_selector] = None
    if not selectors:
        return None
    keys = {
        r.key
        for sel in selectors
        if sel is not None
        for t in sel.node_selector_terms
        for r in t.match_expressions
    }
    return Reach(tuple(selectors), frozenset(keys), _group_by(slices))


def _group_by(slices: Iterable[ResourceSlice]) -> tuple[str, ...] | None:
    keys: set[str] = set()
    for s in slices:
        sels = [s.node_selector, *(d.node_selector for d in s.devices)]
        for sel in sels:
            for term in sel.node_selector_terms if sel is not None else ():
                if term.match_fields:
                    return None
                keys.update(r.key for r in term.match_expressions)
    return tuple(sorted(keys))


class NodeIndex:
    """Every node's name and labels (and declared features, when Nodes are read whole),
    the pools that select nodes, and one sorted snapshot of the nodes shared by every
    judgement until a node changes (the engine keeps a pool's node views while it is
    handed the very same snapshot)."""

    def __init__(self) -> None:
        self._labels: dict[str, Mapping[str, str]] = {}
        # status.declaredFeatures by node, for nodes read whole; empty with metadata only.
        self._declared: dict[str, frozenset[str]] = {}
        self._feature_sets: dict[frozenset[str], frozenset[str]] = {}  # shared equal sets
        self._reach: dict[PoolKey, Reach] = {}
        # Pools with slices that skip node operations, by the nodes those slices name.
        self._skipping: dict[PoolKey, frozenset[str]] = {}
        self._skipping_on: dict[str, set[PoolKey]] = {}
        self._snapshot: tuple[NodeInfo, ...] | None = NO_NODES
        # NodeGroups by the label keys they group on (() for the named nodes alone);
        # cleared with the snapshot.
        self._groups: dict[tuple[str, ...], NodeGroups] = {}

    def __len__(self) -> int:
        return len(self._labels)

    def names(self) -> set[str]:
        return set(self._labels)

    def labels_of(self, name: str) -> Mapping[str, str] | None:
        """A node's labels; None for a node not known."""
        return self._labels.get(name)

    def put(self, node: NodeInfo) -> set[PoolKey]:
        """A node added or changed; the pools whose judgement it may change: those
        offering it devices before or after (a node's view depends on its own labels,
        and declared features, only; a node offered nothing has no view)."""
        old = self._labels.get(node.name)
        labels = {sys.intern(k): sys.intern(v) for k, v in node.labels.items()}
        declared = self._declared_now(node)
        was = self._declared.get(node.name)
        if old == labels and declared == was:
            return set()  # a status update: the watch still sends it
        self._labels[node.name] = labels
        if declared is not None:
            self._declared[node.name] = declared
        self._snapshot = None
        self._groups.clear()
        if old is None or declared != was:
            reached = {k for k, r in self._reach.items() if r.reaches(node.name, labels)}
            if old is not None and old != labels:
                reached |= {k for k, r in self._reach.items() if r.reaches(node.name, old)}
            return reached | self._skipping_pools(node.name, declared, was)
        changed = {k for k in old.keys() | labels.keys() if old.get(k) != labels.get(k)}
        return {
            key
            for key, r in self._reach.items()
            if r.keys & changed and r.matching(node.name, old) != r.matching(node.name, labels)
        }

    def _declared_now(self, node: NodeInfo) -> frozenset[str] | None:
        if node.declared is None:
            return None
        return self._feature_sets.setdefault(node.declared, node.declared)

    def _skipping_pools(self, name: str, *declared: frozenset[str] | None) -> set[PoolKey]:
        """The pools skipping node operations on `name`, when what it declares is read
        (before or after the event): read from metadata alone, a node's coming and going
        does not change those pools' judgement (nodes_for hands them no nodes)."""
        if all(d is None for d in declared):
            return set()
        return set(self._skipping_on.get(name, ()))

    def delete(self, name: str) -> set[PoolKey]:
        old = self._labels.pop(name, None)
        was = self._declared.pop(name, None)
        if old is None:
            return set()
        self._snapshot = None
        self._groups.clear()
        reached = {k for k, r in self._reach.items() if r.reaches(name, old)}
        return reached | self._skipping_pools(name, was)

    def pool_changed(self, key: PoolKey, slices: Iterable[ResourceSlice]) -> None:
        """Call whenever a pool's slices change."""
        slices = list(slices)
        reach = reach_of(slices)
        if reach is None:
            self._reach.pop(key, None)
        else:
            self._reach[key] = reach
        for name in self._skipping.pop(key, ()):
            on = self._skipping_on.get(name)
            if on is not None:
                on.discard(key)
                if not on:
                    del self._skipping_on[name]
        named = _named_skipping(slices)
        if named:
            self._skipping[key] = named
            for name in named:
                self._skipping_on.setdefault(name, set()).add(key)

    def selecting(self) -> set[PoolKey]:
        return set(self._reach)

    def nodes_for(self, key: PoolKey) -> Sequence[NodeInfo]:
        """The nodes to judge `key` from: for a pool that selects, every node, grouped by
        the label values its selectors read (each node alone when one reads names); for
        one whose slices name their nodes, none (its views do not depend on them, and the
        same empty snapshot keeps its prepared views through node events), unless a
        slice skips node operations and nodes declare features (then the named nodes'
        labels and features, as the engine reads them)."""
        reach = self._reach.get(key)
        if reach is None:
            if self._declared and key in self._skipping:
                return self.groups(())
            return NO_NODES
        if reach.group_by is not None:
            return self.groups(reach.group_by)
        return self.snapshot()

    def snapshot(self) -> tuple[NodeInfo, ...]:
        """Every node, sorted by name; the same tuple until a node changes."""
        if self._snapshot is None:
            declared = self._declared
            self._snapshot = tuple(
                NodeInfo(name, self._labels[name], (), declared.get(name))
                for name in sorted(self._labels)
            )
        return self._snapshot

    def groups(self, keys: tuple[str, ...]) -> NodeGroups:
        """The nodes grouped by their values of `keys` (and by the features they declare,
        where known), computed once per node change for all the pools that read the same
        keys (every rack's pool reads the rack label). With no keys and nothing selecting
        (a pool naming its nodes), the groups are never read, only `labels_of` and
        `declared_of`."""
        found = self._groups.get(keys)
        if found is None:
            declared = self._declared
            members: dict[tuple[tuple[str | None, ...], frozenset[str] | None], list[str]] = {}
            for name in sorted(self._labels):
                labels = self._labels[name]
                values = tuple(labels.get(k) for k in keys)
                members.setdefault((values, declared.get(name)), []).append(name)
            found = self._groups[keys] = NodeGroups(
                (
                    NodeInfo(
                        names[0],
                        {k: v for k, v in zip(keys, values, strict=True) if v is not None},
                        tuple(names),
                        features,
                    )
                    for (values, features), names in members.items()
                ),
                self._labels,
                declared,
            )
        return found
