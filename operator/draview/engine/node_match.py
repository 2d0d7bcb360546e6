"""Which devices a node can reach: node-local, selector-based and per-device selection."""

from __future__ import annotations

from collections.abc import Mapping

from draview.api.common import NodeSelector, SelectorRequirement
from draview.api.slices import Device, ResourceSlice


def _requirement(req: SelectorRequirement, value: str | None) -> bool:
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def selector_matches(sel: NodeSelector, node_name: str, labels: Mapping[str, str]) -> bool:
    """core/v1 semantics: terms are ORed; an empty term matches nothing."""
    for term in sel.node_selector_terms:
        if not term.match_expressions and not term.match_fields:
            continue
        fields = {"metadata.name": node_name}
        if all(_requirement(r, labels.get(r.key)) for r in term.match_expressions) and all(
            _requirement(r, fields.get(r.key)) for r in term.match_fields
        ):
            return True
    return False


def node_matches(
    node_name: str | None,
    all_nodes: bool,
    selector: NodeSelector | None,
    node: str | None,
    labels: Mapping[str, str],
) -> bool:
    """The allocator's NodeMatches: nodeName first, then allNodes, then the selector.
    `node` None stands for a node draview does not know (no Node objects given), which
    is assumed to match every selector."""
    if node_name:
        return node == node_name
    if all_nodes:
        return True
    if selector is not None:
        return node is None or selector_matches(selector, node, labels)
    return False


def device_reaches(s: ResourceSlice, dev: Device, node: str, labels: Mapping[str, str]) -> bool:
    if s.per_device_node_selection:
        return node_matches(dev.node_name, dev.all_nodes, dev.node_selector, node, labels)
    return node_matches(s.node_name, s.all_nodes, s.node_selector, node, labels)


def slice_may_reach(s: ResourceSlice, node: str, labels: Mapping[str, str]) -> bool:
    """True when some device of the slice may be reachable from the node."""
    if s.per_device_node_selection:
        return any(device_reaches(s, d, node, labels) for d in s.devices)
    return node_matches(s.node_name, s.all_nodes, s.node_selector, node, labels)
