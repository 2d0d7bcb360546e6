"""Whether every node sees the pool alike: the `ConsistentAcrossNodes` condition.

The allocator judges a pool per node (engine/node_views.py). Usually every node that reaches
a pool sees the same generation, complete and valid. When they differ (a driver rolled
out a new generation to some nodes only, a selector that leaves some nodes on the old
slices), which devices are usable depends on where the pod lands: a person needs to know
which generation which nodes see, and how many nodes each.

The message of a consistent pool names no node count, so that nodes joining or leaving
a cluster do not rewrite every pool that reaches all nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from draview.api.status import Condition
from draview.engine.conditions import condition
from draview.engine.flatten import FlatSlice
from draview.engine.node_views import View

CONDITION = "ConsistentAcrossNodes"
SHOWN_NODES = 3
_STATE = {
    "ok": "complete and valid",
    "invalid": "invalid",
    "incomplete": "incomplete",
    "obsolete": "superseded by a newer generation",
}
Signature = tuple[int, tuple[str, ...], tuple[int, ...]]


def _signature(view: View, flat: Sequence[FlatSlice]) -> Signature:
    counts = tuple(sorted({flat[i].slice.pool.resource_slice_count for i, _ in view.first}))
    return view.generation, tuple(o.kind for o in view.outcomes), counts


def _nodes(names: Sequence[str | None]) -> str:
    shown = ["an assumed node" if n is None else n for n in sorted(names, key=str)]
    more = len(shown) - SHOWN_NODES
    listed = ", ".join(shown[:SHOWN_NODES]) + (f" and {more} more" if more > 0 else "")
    return f"{len(shown)} node{'s' if len(shown) != 1 else ''} ({listed})"


def _describe(sig: Signature) -> str:
    generation, kinds, counts = sig
    state = " or ".join(dict.fromkeys(_STATE[k] for k in kinds)) or "without devices"
    expect = f", {'/'.join(map(str, counts))} slice(s) expected" if counts else ""
    return f"generation {generation}, {state}{expect}"


Summary = tuple[bool, str, str]  # status, reason, message


def node_views_condition(
    views: Sequence[View],
    flat: Sequence[FlatSlice],
    unreachable: int,
    previous: Mapping[str, Condition] | None = None,
    now: str | None = None,
) -> Condition:
    """`unreachable`: the pool's current devices that no node's view offers."""
    return as_condition(summarize(views, flat, unreachable), previous, now)


def as_condition(
    summary: Summary, previous: Mapping[str, Condition] | None, now: str | None
) -> Condition:
    return condition(CONDITION, *summary, previous, now)


def unreachable_devices(views: Sequence[View], flat: Sequence[FlatSlice], current: int) -> int:
    """Devices of the current slices (the first `current` of `flat`) that no view offers."""
    offered = {at for view in views for at in view.targets}
    return sum((i, j) not in offered for i in range(current) for j in range(len(flat[i].devices)))


def summarize(views: Sequence[View], flat: Sequence[FlatSlice], unreachable: int) -> Summary:
    """Depends on the slices and nodes only: computed once per PreparedPool."""
    groups: dict[Signature, list[str | None]] = {}
    for view in views:
        if view.targets:  # a node offered nothing (counter sets only) has no say
            groups.setdefault(_signature(view, flat), []).extend(view.nodes)
    lost = f"; {unreachable} device(s) reachable by no node" if unreachable else ""
    if not groups:
        if not unreachable:
            return True, "NoDevices", "no device to reach"
        return False, "NoNodeReaches", f"no node reaches the pool{lost}"
    if len(groups) == 1:
        (sig,) = groups
        message = f"every node that reaches the pool sees {_describe(sig)}{lost}"
        return not unreachable, "DevicesUnreachable" if unreachable else "SameView", message
    # Newest generation first, then the larger node set.
    order = sorted(groups.items(), key=lambda kv: (-kv[0][0], -len(kv[1]), kv[0]))
    parts = [f"{_describe(sig)} on {_nodes(names)}" for sig, names in order]
    return False, "NodeViewsDiffer", "; ".join(parts) + lost
