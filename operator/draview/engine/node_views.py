"""A pool as each node sees it, the way the allocator's GatherPools builds it.

The allocator never judges a pool as a whole: for every node it gathers only the slices
that reach that node (slices with shared counters always count), keeps the newest
generation among them, and decides completeness from the resourceSliceCount of the
first slice it gathered (node-local slices come first). Only when that looks incomplete
does it consult the pool's other slices: a newer generation there makes the node's view
obsolete, and otherwise their number decides completeness, and their devices debit the
counters. Device names are checked for duplicates only within the node's own slices.

Everything here depends on slices and nodes only, so it is computed once per change of
a pool's slices and reused for every claim change (see PreparedPool).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice, permutations
from typing import Literal

from draview.api.common import NodeSelector
from draview.api.node_info import AssumedNodes, NodeGroups, NodeInfo
from draview.api.slices import any_binding_conditions
from draview.engine.flatten import FlatSlice
from draview.engine.node_match import node_matches
from draview.engine.rules import REFERENCE, Rules
from draview.engine.validate import ParsedPool, parse_pool


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node to look at the pool from. `name` None stands for the nodes draview does
    not know (no Node objects given): such a node is assumed to match every selector."""

    name: str | None
    labels: Mapping[str, str] = field(default_factory=dict)
    members: tuple[str, ...] = ()  # the nodes it stands for, when more than itself
    declared: frozenset[str] | None = None  # status.declaredFeatures; None: not known

    def lacks(self, feature: str) -> bool:
        """Known not to declare `feature` (a node whose status is unknown is taken to)."""
        return self.declared is not None and feature not in self.declared


def matches(
    node_name: str | None, all_nodes: bool, selector: NodeSelector | None, cand: Candidate
) -> bool:
    return node_matches(node_name, all_nodes, selector, cand.name, cand.labels)


OutcomeKind = Literal["ok", "invalid", "incomplete", "obsolete"]
# The feature a node declares (status.declaredFeatures) when its kubelet can do without
# the node operations a slice's skipNodeOperations names.
NODE_OPERATIONS = "DRAOptionalNodeOperations"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one node view amounts to for one resourceSliceCount the allocator may trust."""

    kind: OutcomeKind
    parsed: ParsedPool | None = None  # "ok" and "invalid": the view's counters and errors
    # Fewer slices than the count trusted, in a profile whose allocator still hands out
    # the devices (1.34, rules.incomplete_pools_refused off): only allocationMode All
    # fails on it.
    short: bool = False


@dataclass(frozen=True, slots=True)
class View:
    nodes: tuple[str | None, ...]  # the candidate nodes that share this view
    generation: int
    targets: tuple[tuple[int, int], ...]  # (slice index, device index) the view can hand out
    stale: tuple[int, ...]  # slices that reach these nodes but are of an older generation
    # One outcome per distinct count among the slices the allocator may gather first;
    # more than one only when slices of a generation disagree on resourceSliceCount.
    outcomes: tuple[Outcome, ...]
    # Targets whose node selector has several terms: the allocator fails when it writes
    # the result's node selector (createNodeSelector supports one term), so the
    # scheduler aborts any attempt that picks them.
    unsupported: frozenset[tuple[int, int]] = frozenset()
    # The slices GatherPools may meet first for these nodes, each with the index of the
    # outcome its count leads to: which one it meets depends on the list order.
    first: tuple[tuple[int, int], ...] = ()
    # These nodes do not declare DRAOptionalNodeOperations: the devices of slices with
    # skipNodeOperations are refused here (rules.optional_node_operations).
    lacks_node_operations: bool = False


def _has_fields(fs: FlatSlice) -> bool:
    s = fs.slice
    return bool(s.node_name) or s.all_nodes or s.node_selector is not None


def relevant(fs: FlatSlice, cand: Candidate, counters_everywhere: bool = True) -> bool:
    if fs.ignored:
        return False
    if fs.counter_sets and counters_everywhere:
        return True
    s = fs.slice
    if _has_fields(fs):
        return matches(s.node_name, s.all_nodes, s.node_selector, cand)
    if s.per_device_node_selection:
        return any(matches(d.node_name, d.all_nodes, d.node_selector, cand) for d in fs.devices)
    return False  # nothing set: an extension the allocator does not know; it skips it


def candidates(flat: Sequence[FlatSlice], nodes: Sequence[NodeInfo] | None) -> list[Candidate]:
    """Every node whose view of the pool can differ: the nodes the slices name, and the
    known nodes when a slice or device selects nodes. Without Node objects (None, or
    AssumedNodes: the nodes the whole input names, label-less) one unknown node that
    matches every selector stands for the nodes nobody names."""
    named: set[str] = set()
    selects = False
    for fs in flat:
        s = fs.slice
        if s.node_name:
            named.add(s.node_name)
        elif s.all_nodes or s.node_selector is not None:
            selects = True
        elif s.per_device_node_selection:
            for d in fs.devices:
                if d.node_name:
                    named.add(d.node_name)
                elif d.all_nodes or d.node_selector is not None:
                    selects = True
    known = _labels_of(nodes) if named else {}
    declared = _declared_of(nodes) if named else {}
    # Where the Node objects carry their status, a named node they lack has none: it
    # declares nothing. Without statuses (the operator reads metadata only) nothing is
    # known, and a node is taken to declare what a slice needs.
    unknown: frozenset[str] | None = frozenset() if declared else None
    out = [Candidate(n, known.get(n, {}), (), declared.get(n, unknown)) for n in sorted(named)]
    if selects:
        if nodes is not None:
            out.extend(_unnamed(nodes, named))
        if nodes is None or isinstance(nodes, AssumedNodes):
            out.append(Candidate(None))
    return out


def _labels_of(nodes: Sequence[NodeInfo] | None) -> Mapping[str, Mapping[str, str]]:
    """Every node's labels by name. Assumed nodes carry none: mapping a thousand of them
    again for each of a thousand pools would be a million lookups for nothing."""
    if isinstance(nodes, NodeGroups):
        return nodes.labels_of
    if nodes is None or isinstance(nodes, AssumedNodes):
        return {}
    return {n.name: n.labels for n in nodes}


def _declared_of(nodes: Sequence[NodeInfo] | None) -> Mapping[str, frozenset[str]]:
    """The features each node declares, where its status is known."""
    if isinstance(nodes, NodeGroups):
        return nodes.declared_of
    if nodes is None or isinstance(nodes, AssumedNodes):
        return {}
    return {n.name: n.declared for n in nodes if n.declared is not None}


def _unnamed(nodes: Sequence[NodeInfo], named: set[str]) -> Iterator[Candidate]:
    """The nodes no slice names, a group of them (NodeGroups) as one candidate."""
    for n in nodes:
        if not n.members:
            if n.name not in named:
                yield Candidate(n.name, n.labels, (), n.declared)
            continue
        members = tuple(m for m in n.members if m not in named) if named else n.members
        if members:
            yield Candidate(members[0], n.labels, members if len(members) > 1 else (), n.declared)


class Parser:
    """parse_pool over sets of slice indices, each distinct set parsed once. Seeded with
    the pool-wide parse of the newest slices, which is what almost every view needs: a
    pool of 1,000 MIG nodes would otherwise be parsed (and held) twice."""

    def __init__(self, flat: Sequence[FlatSlice], rules: Rules = REFERENCE) -> None:
        self.flat = flat
        # Without partitionable devices buildPool checks device names only, and never
        # the slices that do not reach the node.
        self.partitionable = rules.partitionable
        # counter_slices_everywhere (engine/rules.py): where it is off, the counter
        # slices of the rest of the pool are counter sources like the node's own.
        self.everywhere = rules.counter_slices_everywhere
        # node_slices_first: where it is off, any slice of the view may be met first.
        self.local_first = rules.node_slices_first
        # 1.34: no checkSlicesInPool, incomplete pools hand out devices, counters per slice.
        self.check_pool = rules.check_slices_in_pool
        self.refuse_incomplete = rules.incomplete_pools_refused
        self.per_slice = not rules.counters_per_pool
        self.binding_last = rules.binding_slices_last
        self.node_operations = rules.node_operations_checked and rules.optional_node_operations
        self.done: dict[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ParsedPool] = {}
        self.names_done: dict[tuple[int, ...], ParsedPool] = {}

    @staticmethod
    def key(
        flat: Sequence[FlatSlice], view: Sequence[int], others: Sequence[int] = ()
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        counters = tuple(i for i in view if flat[i].counter_sets)
        # A slice with both devices and counter sets is 1.34's layout: there it is both;
        # from 1.35 its devices are never allocated (FlatSlice.counters_only).
        devices = tuple(
            i
            for i in view
            if (flat[i].devices and not flat[i].counters_only) or not flat[i].counter_sets
        )
        return counters, devices, tuple(others)

    def seed(self, view: Sequence[int], parsed: ParsedPool) -> None:
        if self.partitionable:
            self.done[self.key(self.flat, view)] = parsed

    def __call__(self, view: Sequence[int], others: Sequence[int]) -> ParsedPool:
        if not self.partitionable:
            return self._names_only(view)
        if not self.everywhere and others:
            flat = self.flat
            view = [*view, *(i for i in others if flat[i].counter_sets)]
            others = [i for i in others if not flat[i].counter_sets]
        key = self.key(self.flat, view, others)
        found = self.done.get(key)
        if found is None and not key[1]:
            # Slices checked as "others" get fewer checks than the node's own: where the
            # same slices passed as the node's own, the answer and the debits are the same.
            own = self.done.get((key[0], key[2], ()))
            if own is not None and not own.errors:
                found = own
        if found is None:
            flat = self.flat
            found = parse_pool(
                [flat[i] for i in key[0]],
                [flat[i] for i in key[1]],
                [flat[i] for i in key[2]],
                self.per_slice,
            )
            self.done[key] = found
        return found

    def _names_only(self, view: Sequence[int]) -> ParsedPool:
        key = tuple(view)
        found = self.names_done.get(key)
        if found is None:
            parsed = parse_pool([], [self.flat[i] for i in view])
            names = [e for e in parsed.errors if e.startswith("DuplicateDevice:")]
            found = self.names_done[key] = replace(parsed, errors=names, partitionable=False)
        return found


def _outcome(
    flat: Sequence[FlatSlice], view: list[int], generation: int, count: int, parse: Parser
) -> Outcome:
    others: list[int] = []
    short = False
    if len(view) != count and not parse.check_pool:
        if parse.refuse_incomplete:
            return Outcome("incomplete")
        short = True
    elif len(view) != count:
        # checkSlicesInPool: the rest of the pool decides.
        gens = [fs.slice.pool.generation for fs in flat]
        if any(g > generation for g in gens):
            return Outcome("obsolete")
        # Slices skipped for compatibility groups are filtered out of this count too.
        at_gen = [i for i, g in enumerate(gens) if g == generation and not flat[i].uncounted]
        if len(at_gen) != count:
            return Outcome("incomplete")
        taken = set(view)
        others = [i for i in at_gen if i not in taken]
    parsed = parse(view, others)
    return Outcome("invalid" if parsed.errors else "ok", parsed, short)


def _view(
    flat: Sequence[FlatSlice],
    rel: tuple[int, ...],
    reach: frozenset[tuple[int, int]],
    names: list[str | None],
    parse: Parser,
) -> View:
    generation = max(flat[i].slice.pool.generation for i in rel)
    view = [i for i in rel if flat[i].slice.pool.generation == generation]
    stale = tuple(i for i in rel if flat[i].slice.pool.generation != generation)
    # The slices GatherPools may meet first (empty: any of the view). From 1.36 the
    # scheduler hands it the node's own slices (by nodeName) first; until 1.37 slices with
    # counter sets were among the shared ones whatever their nodeName. Before 1.36 the
    # list order alone decides (rules.node_slices_first), except that 1.34's and 1.35's
    # experimental GatherPools add slices with binding conditions last.
    leading = [
        i
        for i in view
        if parse.local_first
        and flat[i].slice.node_name
        and not (flat[i].counter_sets and parse.everywhere)
    ]
    if parse.binding_last and not leading:
        plain = [i for i in view if not any_binding_conditions(flat[i].devices)]
        leading = plain if len(plain) < len(view) else []
    counts = sorted({flat[i].slice.pool.resource_slice_count for i in (leading or view)})
    targets: list[tuple[int, int]] = []
    unsupported: list[tuple[int, int]] = []
    for i in view:
        fs = flat[i]
        if fs.counter_sets and (not fs.devices or fs.counters_only):
            continue
        s = fs.slice
        per_device = s.per_device_node_selection and not _has_fields(fs)
        mine = [(i, j) for j in range(len(fs.devices)) if not per_device or (i, j) in reach]
        targets.extend(mine)
        # Only a slice that selects nodes per device, or by a selector of its own, can
        # hold a device whose selector has several terms: asked of the slice first, not
        # of each of its devices (a large pool has hundreds).
        if per_device or (not s.node_name and s.node_selector is not None):
            unsupported.extend(at for at in mine if _multi_term(fs, at[1]))
    outcomes = tuple(_outcome(flat, view, generation, c, parse) for c in counts)
    first = tuple(
        (i, counts.index(flat[i].slice.pool.resource_slice_count)) for i in leading or view
    )
    return View(
        tuple(names), generation, tuple(targets), stale, outcomes, frozenset(unsupported), first
    )


def _multi_term(fs: FlatSlice, j: int) -> bool:
    s = fs.slice
    if fs.devices[j].binds_to_node:
        return False  # createNodeSelector writes the node's name for it, like a nodeName
    if s.per_device_node_selection and not _has_fields(fs):
        dev = fs.devices[j]
        name, selector = dev.node_name, dev.node_selector
    else:
        name, selector = s.node_name, s.node_selector
    return not name and selector is not None and len(selector.node_selector_terms) > 1


def build_views(
    flat: Sequence[FlatSlice], nodes: Sequence[NodeInfo] | None, parse: Parser | None = None
) -> list[View]:
    """One view per distinct set of slices (and per-device matches) that reaches a node."""
    groups: dict[tuple[tuple[int, ...], frozenset[tuple[int, int]], bool], list[str | None]] = {}
    parse = parse or Parser(flat)
    # Nodes tell apart by their declared features only where a slice needs them.
    skips = parse.node_operations and any(fs.slice.skip_node_operations for fs in flat)
    for cand in candidates(flat, nodes):
        rel = tuple(i for i, fs in enumerate(flat) if relevant(fs, cand, parse.everywhere))
        if not rel:
            continue
        # A view without devices still counts: GatherPools lists the pool, and a
        # request for all devices fails while it looks incomplete or invalid.
        reach = frozenset(
            (i, j)
            for i in rel
            if flat[i].slice.per_device_node_selection and not _has_fields(flat[i])
            for j, d in enumerate(flat[i].devices)
            if matches(d.node_name, d.all_nodes, d.node_selector, cand)
        )
        lacks = skips and cand.lacks(NODE_OPERATIONS)
        groups.setdefault((rel, reach, lacks), []).extend(cand.members or (cand.name,))
    return [
        replace(_view(flat, rel, reach, names, parse), lacks_node_operations=lacks)
        if lacks
        else _view(flat, rel, reach, names, parse)
        for (rel, reach, lacks), names in groups.items()
    ]


def bystander(
    flat: Sequence[FlatSlice], parse: Parser | None = None
) -> tuple[tuple[Outcome, ...], tuple[tuple[int, int], ...]]:
    """What a node that reaches only the pool's counter slices gets from GatherPools:
    the outcomes, and the slices it may meet first (as View.first). From 1.37 counter
    slices reach only the nodes they select, so there is no such node."""
    parse = parse or Parser(flat)
    if not parse.everywhere:
        return (), ()
    rel = [i for i, fs in enumerate(flat) if fs.counter_sets and not fs.ignored]
    if not rel:
        return (), ()
    generation = max(flat[i].slice.pool.generation for i in rel)
    view = [i for i in rel if flat[i].slice.pool.generation == generation]
    counts = sorted({flat[i].slice.pool.resource_slice_count for i in view})
    parse = parse or Parser(flat)
    first = tuple((i, counts.index(flat[i].slice.pool.resource_slice_count)) for i in view)
    return tuple(_outcome(flat, view, generation, c, parse) for c in counts), first


def first_choices(
    firsts: Sequence[tuple[tuple[int, int], ...]], limit: int = 720
) -> list[tuple[int, ...]]:
    """Which outcome each of several views of one pool gets, for every order of the pool's
    slices that the scheduler's list may have (only the pool's own slices' relative
    order matters: pools are gathered apart). Distinct assignments, one index per view."""
    candidates = sorted({i for first in firsts for i, _ in first})
    out: dict[tuple[int, ...], None] = {}
    for order in islice(permutations(candidates), limit):
        rank = {i: n for n, i in enumerate(order)}
        out[tuple(min(first, key=lambda p: rank[p[0]])[1] if first else 0 for first in firsts)] = (
            None
        )
    return list(out)
