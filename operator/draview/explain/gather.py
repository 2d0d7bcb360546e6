"""The pools one node's allocator sees (GatherPools), built from the engine's node views.

The search (explain/search.py) walks these exactly as the allocator does: pools sorted by
driver and pool (those holding devices with binding conditions last, where the profile's
GatherPools puts them last), a pool's device slices sorted by name, devices in slice order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from draview.api.slices import Device, Taint, any_binding_conditions
from draview.api.taints import DeviceTaintRule
from draview.engine.aborts import binding_view
from draview.engine.flatten import FlatSlice
from draview.engine.model import PoolKey
from draview.engine.node_views import Outcome, View, first_choices
from draview.engine.pool import PoolResult, PreparedPool
from draview.engine.taints import effective_taints
from draview.engine.validate import CounterKey, ParsedPool
from draview.engine.verdict import AllocatedState


# Not frozen, though never changed once built: one is built per device of every node's
# pools at each question, and a frozen dataclass's __init__ costs five times as much.
@dataclass(slots=True, unsafe_hash=True)
class SearchDevice:
    driver: str
    pool: str
    slice_name: str
    slice_generation: int
    device: Device
    reaches: bool  # per-device node selection: does the device itself reach the node
    taints: tuple[Taint, ...]
    # What taking it debits from the pool's counters, in nanos, summed per counter
    # (ParsedPool.nanos).
    debits: tuple[tuple[CounterKey, int], ...]
    unsupported_selector: bool  # several node-selector terms: the result cannot be written
    # A nodeName (or bindsToNode) decides where it is: the result names the node alone.
    node_local: bool
    # Its slice has skipNodeOperations and the node or the scheduler cannot do without.
    node_operations_refused: bool = False

    @property
    def id(self) -> tuple[str, str, str]:
        # Made when asked (a device being taken, mostly), not kept: the devices are
        # kept with the pool's slices (PreparedPool.walk_checks).
        return (self.driver, self.pool, self.device.name)

    @property
    def cel_key(self) -> tuple[str, str, str, int, str]:
        return (self.driver, self.pool, self.slice_name, self.slice_generation, self.device.name)


@dataclass(slots=True)
class NodePool:
    driver: str
    pool: str
    incomplete: bool = False
    invalid: bool = False
    slices: list[list[SearchDevice]] = field(default_factory=list)
    parsed: ParsedPool | None = None  # the view's counter sets and counted devices
    allocated: AllocatedState = field(default_factory=AllocatedState)
    binding: bool = False  # some device of its slices has binding conditions
    # Which of `slices` the list may hold first, where the count it trusts depends on
    # that (None: any); only the walk of a list-ordered pool (1.34, 1.35) cares.
    firsts: frozenset[int] | None = None
    # The name of each of `slices`: a slice is the same one on every node, and one
    # attempt lists it in the same place for all of them.
    names: list[str] = field(default_factory=list)
    # Per slice of `slices`, what searches learned of it that no allocation changes
    # (its devices, and search.py `_static`), kept with the pool's prepared slices.
    checks: list[dict[object, object]] = field(default_factory=list)

    def holding(self, allocated: AllocatedState) -> NodePool:
        """The pool with `allocated` for its state: dataclasses.replace without its work
        per field, for the searches of fit, which make one per pool a copy took devices
        in (every field is passed on: test_gather_holding)."""
        return NodePool(
            self.driver,
            self.pool,
            self.incomplete,
            self.invalid,
            self.slices,
            self.parsed,
            allocated,
            self.binding,
            self.firsts,
            self.names,
            self.checks,
        )


@dataclass(slots=True)
class GatherIndex:
    """Which pools each node has a view of: looking the views up per node would cost
    nodes x pools. Kept per pool, so that a pool judged again is put again on its own."""

    # node -> pool -> (pool result, index of the view in result.prepared.views)
    by_node: dict[str | None, dict[PoolKey, tuple[PoolResult, int]]] = field(default_factory=dict)
    # Pools a node without a view of them still gathers (through their counter slices),
    # kept only when that is not simply ok: only then can they change an answer.
    bystanders: dict[PoolKey, PoolResult] = field(default_factory=dict)
    # The nodes each pool was put under, to take it out again.
    _nodes_of: dict[PoolKey, list[str | None]] = field(default_factory=dict)
    _sorted: tuple[str | None, ...] | None = None

    @classmethod
    def build(cls, results: Sequence[PoolResult]) -> GatherIndex:
        index = cls()
        for r in results:
            index.put(r)
        return index

    def put(self, r: PoolResult) -> None:
        """Index `r` in place of what its pool had."""
        left = self._take_out(r.key)
        p = r.prepared
        if p is not None:
            nodes: list[str | None] = []
            for vi, v in enumerate(p.views):
                for n in v.nodes:
                    pools = self.by_node.get(n)
                    if pools is None:
                        pools = self.by_node[n] = {}
                        self._sorted = None
                    pools[r.key] = (r, vi)
                    nodes.append(n)
            self._nodes_of[r.key] = nodes
            if any(o.kind != "ok" for o in p.bystander):
                self.bystanders[r.key] = r
        self._prune(left)

    def drop(self, key: PoolKey) -> None:
        self._prune(self._take_out(key))

    def _take_out(self, key: PoolKey) -> list[str | None]:
        """Take the pool out of its nodes; the nodes it leaves with no pool, which stay
        until _prune (a pool put again under the same nodes keeps the nodes' order)."""
        self.bystanders.pop(key, None)
        left = []
        for n in self._nodes_of.pop(key, ()):
            pools = self.by_node.get(n)
            if pools is None:
                continue
            pools.pop(key, None)
            if not pools:
                left.append(n)
        return left

    def _prune(self, nodes: Sequence[str | None]) -> None:
        for n in nodes:
            if n in self.by_node and not self.by_node[n]:
                del self.by_node[n]
                self._sorted = None

    def nodes_of(self, key: PoolKey) -> Sequence[str | None]:
        """The nodes the pool was put under (one entry per view they are in)."""
        return self._nodes_of.get(key, ())

    def nodes(self) -> tuple[str | None, ...]:
        """Every node some pool has a view for (None: a node no slice names, when draview
        does not know the cluster's nodes). The same tuple until a node comes or goes:
        a capacity probe reads it at each asking, and copying a thousand names costs
        more than the pools that changed."""
        if self._sorted is None:
            self._sorted = tuple(sorted(self.by_node, key=lambda n: (n is None, n or "")))
        return self._sorted


def node_names(results: Sequence[PoolResult]) -> tuple[str | None, ...]:
    return GatherIndex.build(results).nodes()


def _pool(r: PoolResult, vi: int, which: int, rules: Sequence[DeviceTaintRule]) -> NodePool | None:
    """`vi`: the index of the node's view among the pool's (-1: its bystander view);
    `which`: the index of the count the allocator trusts among the view's candidates."""
    prepared = r.prepared
    assert prepared is not None
    driver, name = r.key
    view = prepared.views[vi] if vi >= 0 else None
    outcomes = view.outcomes if view is not None else prepared.bystander
    if not outcomes:
        return None  # nothing of the pool reaches the node
    picked = min(which, len(outcomes) - 1)
    o = outcomes[picked]
    if o.kind == "obsolete":
        return None  # GatherPools drops it
    out = NodePool(driver, name, allocated=r.allocated or AllocatedState())
    if o.kind == "incomplete":
        out.incomplete = True
        return out
    if o.kind == "invalid":
        out.invalid = True
        # 1.34 meets it in its walk, after the others when it holds binding conditions.
        out.binding = view is not None and binding_view(view, prepared.flat)
        return out
    out.parsed = o.parsed
    # 1.34 walks a pool that looks incomplete like any other; allocationMode All fails.
    out.incomplete = o.short
    if view is None:
        return out
    flat = prepared.flat
    profile_rules = prepared.rules
    refuse_skips = profile_rules.node_operations_checked and (
        view.lacks_node_operations or not profile_rules.optional_node_operations
    )
    learnt = prepared.walk_checks
    slice_indices, binding = _walked(prepared, view, vi, picked)
    out.binding = out.binding or binding
    targets: set[tuple[int, int]] | None = None
    for i in slice_indices:
        fs = flat[i]
        # The same devices, reach and counts for every node of the view, and at every
        # question while the slices stay: built once for the taint rules of the day.
        mine = learnt.setdefault((vi, picked, i), {})
        kept = cast(
            tuple[tuple[DeviceTaintRule, ...], list[SearchDevice]] | None, mine.get(_DEVICES)
        )
        # As a tuple: callers hand the world's rules as a list or a tuple alike.
        if kept is None or not (kept[0] is rules or kept[0] == tuple(rules)):
            if targets is None:
                targets = set(view.targets)
            kept = mine[_DEVICES] = (
                tuple(rules),
                _devices(r.key, i, fs, view, targets, rules, o, refuse_skips),
            )
        out.slices.append(kept[1])
        out.names.append(fs.slice.name)
        out.checks.append(mine)
    if len(outcomes) > 1:
        out.firsts = _firsts(view, picked, slice_indices)
    return out


def _walked(prepared: PreparedPool, view: View, vi: int, picked: int) -> tuple[list[int], bool]:
    """The view's slices the walk meets, in its order (every device of them is walked,
    per-device node selection checked after the selectors as isSelectable does: a
    relevant per-device slice always has some device among the targets), and whether
    one holds binding conditions. Kept with the view's slices: a claim change builds the
    touched node's pools again."""
    of_view = prepared.walk_checks.setdefault((vi, picked, _VIEW), {})
    walked = cast(tuple[list[int], bool] | None, of_view.get(_WALKED))
    if walked is None:
        flat = prepared.flat
        order = sorted({i for i, _ in view.targets}, key=lambda i: flat[i].slice.name)
        binding = any(any_binding_conditions(flat[i].devices) for i in order)
        walked = of_view[_WALKED] = (order, binding)
    return walked


# Where a slice's devices are kept among what searches learnt of it (NodePool.checks).
_DEVICES = "devices"
# What is learnt of the view's slices together, kept in walk_checks in place of one
# slice's (its index -1), and its walked slices in order there.
_VIEW = -1
_WALKED = "walked"


def _devices(
    key: tuple[str, str],
    i: int,
    fs: FlatSlice,
    view: View,
    targets: set[tuple[int, int]],
    rules: Sequence[DeviceTaintRule],
    o: Outcome,
    refuse_skips: bool,
) -> list[SearchDevice]:
    """The devices of the view's slice `i` (flat index), as the search meets them."""
    driver, name = key
    s = fs.slice
    per_device = s.per_device_node_selection and not (
        s.node_name or s.all_nodes or s.node_selector is not None
    )
    nanos: Mapping[str, tuple[tuple[CounterKey, int], ...]] = o.parsed.nanos() if o.parsed else {}
    skips = refuse_skips and bool(s.skip_node_operations)
    return [
        SearchDevice(
            driver,
            name,
            s.name,
            s.generation,
            dev,
            (i, j) in targets,
            effective_taints(driver, name, dev, rules),
            nanos.get(dev.name, ()),
            (i, j) in view.unsupported,
            bool(dev.node_name if per_device else s.node_name) or dev.binds_to_node,
            skips,
        )
        for j, dev in enumerate(fs.devices)
    ]


def _firsts(view: View, picked: int, slice_indices: Sequence[int]) -> frozenset[int] | None:
    """Which of the pool's walked slices the list may hold first, for the count the
    view trusts (`picked`): a list-ordered walk (1.34, 1.35) begins with one of them.
    None where one of those slices is not walked (it may come first unseen)."""
    leading = {i for i, k in view.first if k == picked}
    if not leading <= set(slice_indices):
        return None
    return frozenset(n for n, i in enumerate(slice_indices) if i in leading)


# Per view of a pool (and last, its bystander), the index of the outcome it gets.
Assignment = tuple[int, ...]


def ambiguous_pool(r: PoolResult) -> list[Assignment] | None:
    """For a pool whose slices disagree on resourceSliceCount in some node's view, every
    assignment of counts to its views that some order of its slices gives; else None."""
    p = r.prepared
    if p is None:
        return None
    if any(len(v.outcomes) > 1 for v in p.views) or len(p.bystander) > 1:
        return first_choices([*(v.first for v in p.views), p.bystander_first])
    return None


def ambiguous(results: Sequence[PoolResult]) -> dict[PoolKey, list[Assignment]]:
    """`ambiguous_pool` of each of `results` that has some."""
    out: dict[PoolKey, list[Assignment]] = {}
    for r in results:
        found = ambiguous_pool(r)
        if found is not None:
            out[r.key] = found
    return out


def node_pools(
    node: str | None,
    index: GatherIndex,
    rules: Sequence[DeviceTaintRule],
    which: Mapping[tuple[str, str], Assignment] | None = None,
    binding_last: bool = True,
) -> list[NodePool]:
    """The pools `node` sees, sorted like the allocator sorts them. `which` gives, for a
    pool whose slices disagree on resourceSliceCount, the outcome each of its views gets
    (see `ambiguous`); the first outcome otherwise. `binding_last`:
    rules.binding_pools_last."""
    out: list[NodePool] = []
    seen: set[tuple[str, str]] = set()
    chosen = which or {}
    for r, vi in index.by_node.get(node, {}).values():
        seen.add(r.key)
        assert r.prepared is not None
        pick = chosen[r.key][vi] if r.key in chosen else 0
        pool = _pool(r, vi, pick, rules)
        if pool is not None:
            out.append(pool)
    for r in index.bystanders.values():
        if r.key not in seen:
            pick = chosen[r.key][-1] if r.key in chosen else 0
            pool = _pool(r, -1, pick, rules)
            if pool is not None:
                out.append(pool)
    out.sort(key=lambda p: (binding_last and p.binding, p.driver, p.pool))
    return out
