"""The little of a Node that decides which ResourceSlices reach it: its name and labels,
and the features its kubelet declares (status.declaredFeatures), which 1.37's
DRAOptionalNodeOperations reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from draview.api.slices import ResourceSlice


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    # In NodeGroups: every node this entry stands for (itself first); () for itself alone.
    members: tuple[str, ...] = ()
    # status.declaredFeatures; None where the status is not known (metadata only).
    declared: frozenset[str] | None = None

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> NodeInfo:
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            raise ValueError("metadata.name must be a string")
        labels = meta.get("labels") or {}
        if not isinstance(labels, Mapping):
            raise ValueError("metadata.labels must be a map")
        declared = None
        status = obj.get("status")
        if isinstance(status, Mapping):
            features = status.get("declaredFeatures") or []
            if not isinstance(features, list):
                raise ValueError("status.declaredFeatures must be a list")
            declared = frozenset(str(f) for f in features)
        return cls(meta["name"], {str(k): str(v) for k, v in labels.items()}, (), declared)


class AssumedNodes(tuple[NodeInfo, ...]):
    """The nodes assumed when the input carries no Node objects: a label-less node for
    every node a slice or device names (the allocator's view of a pool differs per node,
    and these nodes exist), plus one unknown node taken to match every node selector
    (which labels the cluster's nodes carry is not known)."""

    __slots__ = ()


class NodeGroups(tuple[NodeInfo, ...]):
    """A cluster's nodes as one pool's node selectors tell them apart: one entry per
    distinct combination of the label values they read, standing for all its members
    (`NodeInfo.members`), its labels those values. A pool's view of a node depends on
    those labels alone, so 65,000 nodes in a thousand racks are judged as a thousand.
    `labels_of` has every node's labels, for the nodes the pool's slices name;
    `declared_of` the declared features of every node whose status is known."""

    labels_of: Mapping[str, Mapping[str, str]]
    declared_of: Mapping[str, frozenset[str]]

    def __new__(
        cls,
        groups: Iterable[NodeInfo],
        labels_of: Mapping[str, Mapping[str, str]],
        declared_of: Mapping[str, frozenset[str]] | None = None,
    ) -> NodeGroups:
        self = super().__new__(cls, groups)
        self.labels_of = labels_of
        self.declared_of = declared_of or {}
        return self


def assumed_nodes(slices: Iterable[ResourceSlice]) -> AssumedNodes:
    named: set[str] = set()
    for s in slices:
        if s.node_name:
            named.add(s.node_name)
        elif s.per_device_node_selection:
            named.update(d.node_name for d in s.devices if d.node_name)
    return AssumedNodes(NodeInfo(n) for n in sorted(named))
