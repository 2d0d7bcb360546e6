"""Compute the status of one pool: every device's state, counters, summaries, validation.

This is the function the operator calls for each dirty pool and `draview analyze` calls
for every pool; it is pure, so the two always agree.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter, itemgetter

from draview.api.node_info import NodeInfo
from draview.api.slices import Device, ResourceSlice
from draview.api.status import (
    Allocation,
    Condition,
    CounterSetStatus,
    CounterUsage,
    DeviceState,
    DeviceStatus,
    FragmentStatus,
    Partition,
    PoolStatusBody,
    PoolStatusBrief,
    SliceStatusBody,
    Summary,
)
from draview.api.taints import DeviceTaintRule
from draview.engine.aborts import (
    ABORTS,
    MAY_ABORT,
    NO_ABORTS,
    Aborts,
    abort_condition,
    aborted_partitions,
    binding_view,
    settle,
)
from draview.engine.capacity import shared_capacity
from draview.engine.composite import CompositeGraph
from draview.engine.conditions import pool_conditions
from draview.engine.consistency import Summary as NodeViews
from draview.engine.consistency import as_condition, summarize, unreachable_devices
from draview.engine.flatten import FlatSlice, flatten_slice
from draview.engine.fragmentation import Fragment, capacity_fragments, fragments, status_entries
from draview.engine.model import AllocRef, EngineOptions, PoolKey, ValidationErrors
from draview.engine.node_views import Outcome, Parser, View, build_views, bystander
from draview.engine.partitions import PartitionInput, first_fit_per_slice, partitions
from draview.engine.pools import PoolSlices, gather_pool
from draview.engine.rules import DEFAULT_RULES, Rules, project, rules_for
from draview.engine.summary import SummaryAcc
from draview.engine.taints import effective_taints, is_blocked
from draview.engine.validate import CounterKey, ParsedPool, parse_pool
from draview.engine.verdict import AllocatedState, Judgement, counters_left, judge
from draview.quantity import Format, Quantity, format_nanos

_sort_key = attrgetter("sort_key")
_state_of = itemgetter("state")
# Reasons for which the allocator never looks at a device copy (engine/verdict.py).
_NEVER_LOOKED_AT = frozenset(
    {
        "StaleGeneration",
        "Unreachable",
        "PartitionableDevicesDisabled",
        "CompatibilityGroupsDisabled",
        "SliceHoldsCounterSets",
    }
)


@dataclass(slots=True)
class SliceResult:
    slice: ResourceSlice
    status: SliceStatusBody


@dataclass(slots=True)
class PoolResult:
    key: PoolKey
    pool: PoolSlices
    status: PoolStatusBody
    slices: list[SliceResult]
    node_name: str | None
    errors: ValidationErrors
    # current-generation device counts by state, for metrics
    states: dict[str, int] = field(default_factory=dict)
    prepared: PreparedPool | None = None
    allocated: AllocatedState | None = None  # the scheduler's view of who holds what
    # What the judgement found left of the counters of each view's parse, in nanos, by
    # the parse's id (counters_left of it and `allocated`): a search of the same
    # allocations reads it (explain/fit_search.py).
    lefts: Mapping[int, Mapping[CounterKey, int]] | None = None


def _allocation(ref: AllocRef) -> Allocation:
    out: Allocation = {
        "claimNamespace": ref.claim_namespace,
        "claimName": ref.claim_name,
        "claimUID": ref.claim_uid,
        "request": ref.request,
    }
    if ref.admin_access:
        out["adminAccess"] = True
    if ref.share_id:
        out["shareID"] = ref.share_id
    if ref.consumed:
        out["capacity"] = dict(ref.consumed)
    return out


def _counter_sets(
    parsed: ParsedPool,
    consumed: Mapping[CounterKey, int],
    fmts: Mapping[CounterKey, Format],
    left: Mapping[CounterKey, int],
) -> dict[str, CounterSetStatus]:
    """Every counter set of the pool, rendered once per computation. `consumed` and
    `left` are nanos; their formats follow Quantity's Add and Sub rules."""
    out: dict[str, CounterSetStatus] = {}
    for name, counters in parsed.sets.items():
        rendered: dict[str, CounterUsage] = {}
        for counter, key, total, text, idle in counters:
            used = consumed.get(key)
            if used is None:
                rendered[counter] = idle  # shared: see validate.SetRow
            else:
                fmt = fmts[key]
                rendered[counter] = {
                    "total": text,
                    "consumed": format_nanos(used, fmt),
                    "available": format_nanos(left[key], fmt if total.nanos == 0 else total.fmt),
                }
        out[name] = {"name": name, "counters": rendered}
    return out


class _PoolComputation:
    """Holds the per-pool context while each device's state is decided."""

    def __init__(
        self,
        key: PoolKey,
        prepared: PreparedPool,
        by_device: Mapping[str, list[AllocRef]],
        rules: Sequence[DeviceTaintRule],
        options: EngineOptions,
        aborts: Aborts = NO_ABORTS,
        judged: Judgement | None = None,
        counted: tuple[AllocatedState, dict[CounterKey, int]] | None = None,
    ) -> None:
        """`judged`: the devices' verdicts, when the caller worked them out
        (engine/judged.py judges a few devices again); else every device is judged.
        `counted`: the allocations' state and what is left of every counter, when the
        caller worked them out from an earlier count (engine/judged.py); the consumption
        the status renders is then summed only when asked for."""
        self.key = key
        self.prepared = prepared
        self.flat = prepared.flat
        parsed = self.parsed = prepared.parsed
        self.by_device = by_device
        self.rules = rules
        self.options = options
        self.alloc = (
            AllocatedState.for_rules((r for rs in by_device.values() for r in rs), prepared.rules)
            if counted is None
            else counted[0]
        )
        self.in_use = self.alloc.held() & by_device.keys()
        self._consumed: tuple[dict[CounterKey, int], dict[CounterKey, Format]] | None = None
        self.composite = CompositeGraph(prepared.composite, self.in_use)
        if counted is None:
            # What is left of every counter (as the pool's newest slices count it),
            # computed once rather than once per device.
            self.left = {k: q.nanos for k, q in parsed.counter_totals.items()}
            for ckey, used in self.consumed.items():
                if ckey in self.left:
                    self.left[ckey] -= used
        else:
            self.left = counted[1]
        self.lefts: dict[int, Mapping[CounterKey, int]] = {}  # _left_for's, by id(parse)
        self.has_capacity = False  # some device shows capacity: overcommit is possible
        self._sets: dict[str, CounterSetStatus] | None = None
        self.judgement = judged or judge(
            prepared.views,
            prepared.flat,
            self.alloc,
            self.tainted,
            self.composite.blocked,
            self._left_for,
            prepared.rules,
        )
        self._settle_aborts(aborts)

    @property
    def consumed(self) -> dict[CounterKey, int]:
        """What the devices in use debit of each counter, in nanos."""
        return self._count()[0]

    @property
    def consumed_fmt(self) -> dict[CounterKey, Format]:
        """The format of each sum in `consumed`."""
        return self._count()[1]

    def _count(self) -> tuple[dict[CounterKey, int], dict[CounterKey, Format]]:
        # Summed as integer nanos, each with the format Quantity's Add rule gives it (a
        # zero running total takes the next item's format): a claim change re-sums every
        # in-use device's debits, and a Quantity object per addition costs more than the sum.
        if self._consumed is None:
            consumption = self.parsed.consumption
            consumed: dict[CounterKey, int] = {}
            fmts: dict[CounterKey, Format] = {}
            for name in sorted(self.alloc.debiting(self.in_use)):
                for ckey, q in consumption.get(name, ()):
                    before = consumed.get(ckey)
                    if not before:
                        fmts[ckey] = q.fmt
                    consumed[ckey] = q.nanos if before is None else before + q.nanos
            self._consumed = consumed, fmts
        return self._consumed

    @property
    def tainted(self) -> Callable[[int, int], bool] | None:
        """Whether a device (slice and device index) is tainted; None: none can be."""
        return self._tainted if self.rules or self.prepared.has_taints else None

    @property
    def sets(self) -> dict[str, CounterSetStatus]:
        """The counter sets as the pool's status shows them, rendered when first asked for:
        `fit` judges pools again for their devices alone (device_statuses)."""
        if self._sets is None:
            self._sets = _counter_sets(self.parsed, self.consumed, self.consumed_fmt, self.left)
        return self._sets

    def _settle_aborts(self, aborts: Aborts) -> None:
        """1.34: invalid pools that nodes gather refuse devices of every pool."""
        prepared = self.prepared
        self.aborts = NO_ABORTS if prepared.rules.invalid_pool_is_node_local else aborts
        settle(self.judgement.verdicts, self.judgement.offers, prepared.tiers, self.aborts)

    def _left_for(self, parsed: ParsedPool) -> Mapping[CounterKey, int]:
        # The view of almost every pool is its newest slices, already counted above
        # (without duplicates, counting by name and by instance agree).
        found = self.lefts.get(id(parsed))
        if found is None:
            if parsed is self.parsed and not parsed.errors:
                found = self.left
            else:
                found = counters_left(parsed, self.alloc)
            self.lefts[id(parsed)] = found
        return found

    def debits(self, i: int, j: int) -> list[tuple[CounterKey, Quantity]]:
        """What the device debits, as the first node view that hands it out parses it."""
        dev = self.flat[i].devices[j]
        return self.parsed.consumption.get(dev.name, []) if i < len(self.prepared.current) else []

    def _tainted(self, i: int, j: int) -> bool:
        dev = self.flat[i].devices[j]
        if not (dev.taints or self.rules):
            return False
        return is_blocked(effective_taints(self.key[0], self.key[1], dev, self.rules))

    def devices(
        self,
        i: int,
        acc: SummaryAcc,
        pool_acc: SummaryAcc | None,
        only: Sequence[int] | None = None,
    ) -> list[DeviceStatus]:
        """The status of every device of slice `i` (flat index), counted into the
        summaries (`only`: of those devices alone, in that order). One loop per slice,
        lookups hoisted: it runs on every claim change."""
        by_device, cap = self.by_device, self.options.max_listed_allocations
        verdicts, in_use, dedicated = self.judgement.verdicts, self.in_use, self.alloc.dedicated
        devs = self.flat[i].devices
        out: list[DeviceStatus] = []
        for j in range(len(devs)) if only is None else only:
            dev = devs[j]
            name = dev.name
            found_verdict = verdicts.get((i, j))
            verdict, reason = (
                found_verdict if found_verdict is not None else self.judgement.verdict((i, j))
            )
            state: DeviceState
            if verdict == "yes":
                state = "PartiallyAllocated" if name in in_use else "Available"
            elif reason in _NEVER_LOOKED_AT:
                # The allocator never looks at this copy of the device; an allocation
                # naming it is still listed, but it belongs to the copy the allocator uses.
                state = "Unavailable"
            elif name in dedicated or (
                name in in_use and reason in ("InUse", "InsufficientCapacity")
            ):
                state, reason = "Allocated", None
            else:
                state = "Unavailable"
            status: DeviceStatus = {"name": name, "state": state}
            found = by_device.get(name)
            # One holder is the common case: nothing to order.
            refs = (found if len(found) == 1 else sorted(found, key=_sort_key)) if found else []
            if dev.allow_multiple_allocations:
                total, available = shared_capacity(dev, refs)
                if total:
                    self.has_capacity = True
                    status["capacity"] = {k: str(v) for k, v in sorted(total.items())}
                    status["availableCapacity"] = {k: str(v) for k, v in sorted(available.items())}
                acc.add_capacity(total, available)
                if pool_acc is not None:
                    pool_acc.add_capacity(total, available)
            if reason is not None:
                status["stateReason"] = reason
            if refs:
                status["allocations"] = [_allocation(r) for r in refs[:cap]]
                status["allocationCount"] = len(refs)
            out.append(status)
        counts = Counter(map(_state_of, out))
        acc.add_counts(counts)
        if pool_acc is not None:
            pool_acc.add_counts(counts)
        return out


def _check_allocations(
    ps: PoolSlices,
    parsed: ParsedPool,
    by_device: Mapping[str, list[AllocRef]],
    consumed: Mapping[CounterKey, int],
    fmts: Mapping[CounterKey, Format],
    errors: ValidationErrors,
) -> None:
    # Sorted only when something is wrong: this runs on every claim change.
    for name in sorted(n for n in by_device if n not in parsed.devices):
        for ref in sorted(by_device[name], key=_sort_key):
            errors.other.append(
                f"DanglingAllocation: claim {ref.claim_namespace}/{ref.claim_name} "
                f"(request {ref.request or '-'}) names device {name}, which pool "
                f"{ps.key[1]} of driver {ps.key[0]} does not have"
            )
    totals = parsed.counter_totals
    over = [k for k, n in consumed.items() if k in totals and n > totals[k].nanos]
    for ckey in sorted(over):
        used = Quantity(consumed[ckey], fmts[ckey])
        errors.other.append(
            f"{OVERCOMMITTED}: counter {ckey[1]} of counter set {ckey[0]}: "
            f"{used} consumed, {totals[ckey]} available"
        )


# The error of a pool whose allocations debit a counter past its total: every device
# that debits counters is refused then (explain/fit_cut.py reads it).
OVERCOMMITTED = "CounterOvercommitted"


@dataclass(frozen=True, slots=True)
class PreparedPool:
    """What depends only on a pool's slices (and the nodes). A claim change never touches
    a slice, so the operator keeps this per pool and recomputes only states and counts."""

    slices: tuple[ResourceSlice, ...]  # held so that their ids stay unique
    ids: frozenset[int]
    nodes: Sequence[NodeInfo] | None
    ps: PoolSlices
    current: list[FlatSlice]
    stale: list[FlatSlice]
    flat: list[FlatSlice]  # current + stale: the slice indices the views use
    parsed: ParsedPool  # the newest generation's slices taken together: counters shown
    views: tuple[View, ...]
    has_taints: bool  # some device carries taints of its own
    # The pool as a node that reaches none of its devices sees it (counter slices always
    # count): only a request for all devices cares whether that is complete and valid.
    bystander: tuple[Outcome, ...]
    bystander_first: tuple[tuple[int, int], ...]
    slice_errors: tuple[str, ...]
    node_views: NodeViews  # the ConsistentAcrossNodes condition, but for its times
    # Per view: 1 where 1.34's GatherPools puts the pool last (binding conditions), else
    # 0 (rules.binding_pools_last); slices only, so not walked again on a claim change.
    tiers: tuple[int, ...]
    rules: Rules = DEFAULT_RULES  # the profile's rules the slices were read with
    # The composite draft's devices of the current slices (almost always none).
    composite: tuple[Device, ...] = ()
    # What node searches learn of a view's slice once and for all, by (view, the count
    # it trusts, slice): the slice's devices as the walk meets them (explain/gather.py)
    # and which of them each request's selectors pass (explain/search.py). Kept while
    # the slices are: a claim change leaves it standing, so the touched node's
    # searches look it up.
    walk_checks: dict[tuple[int, int, int], dict[object, object]] = field(
        default_factory=dict, compare=False, repr=False
    )
    # The same for the current slices' devices in order, as `why` folds them
    # (explain/index.py PoolDevices.checks).
    index_checks: dict[object, bytes] = field(default_factory=dict, compare=False, repr=False)
    # And per counter set, the places there of the devices that debit it, made when
    # first needed (explain/index.py PoolDevices.debiting): a kept fold judges those of
    # a set whose counters moved again. Empty until then, one map after.
    index_sets: list[dict[str, list[int]]] = field(default_factory=list, compare=False, repr=False)
    # Per view (by id), where the devices consuming from each counter set sit
    # (engine/judged.py): judging the devices a claim change touches looks them up.
    by_set: dict[int, dict[str, list[tuple[int, int]]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def serves(
        self, slices: Sequence[ResourceSlice], nodes: Sequence[NodeInfo] | None, rules: Rules
    ) -> bool:
        # Slices are immutable models, replaced on every update: identity is enough.
        return (
            nodes is self.nodes
            and rules == self.rules
            and len(slices) == len(self.ids)
            and {id(s) for s in slices} == self.ids
        )

    def allocator_errors(self) -> list[str]:
        """The errors that make some node's view of the pool invalid, once each. Where no
        view gets as far as validation (none at all, or all incomplete or obsolete),
        those of the newest slices together: what the pool will fail on once complete."""
        seen: dict[str, None] = {}
        validated = False
        for view in self.views:
            for o in view.outcomes:
                if o.kind in ("ok", "invalid") and o.parsed is not None:
                    validated = True
                    seen.update(dict.fromkeys(o.parsed.errors))
        return list(seen) if validated else list(self.parsed.errors)


def prepare_pool(
    key: PoolKey,
    slices: Sequence[ResourceSlice],
    nodes: Sequence[NodeInfo] | None = None,
    rules: Rules = DEFAULT_RULES,
) -> PreparedPool:
    """`rules`: the profile's (engine/rules.py); devices are read as that scheduler reads
    them (project), so everything after mirrors its allocator."""
    ps = gather_pool(key, slices)
    current = [project(flatten_slice(s), rules) for s in ps.current]
    stale = [project(flatten_slice(s), rules) for s in ps.stale]
    parsed = parse_pool(current, per_slice=not rules.counters_per_pool)
    flat = [*current, *stale]
    parse = Parser(flat, rules)
    parse.seed(range(len(current)), parsed)
    views = tuple(build_views(flat, nodes, parse))
    by, by_first = bystander(flat, parse)
    other = [e for fs in (*current, *stale) for e in fs.errors]
    if len(ps.counts) > 1:
        other.append(
            f"InconsistentSliceCount: slices at generation {ps.generation} disagree on "
            f"resourceSliceCount ({', '.join(map(str, ps.counts))}); the scheduler trusts "
            "whichever it lists first"
        )
    held = tuple(slices)
    return PreparedPool(
        held,
        frozenset(map(id, held)),
        nodes,
        ps,
        current,
        stale,
        flat,
        parsed,
        views,
        any(d.taints for fs in flat for d in fs.devices),
        by,
        by_first,
        tuple(other),
        summarize(views, flat, unreachable_devices(views, flat, len(current))),
        tuple(int(rules.binding_pools_last and binding_view(v, flat)) for v in views),
        rules,
        tuple(d for fs in current for d in fs.devices if d.composite),
    )


def compute_pool(
    key: PoolKey,
    slices: Sequence[ResourceSlice],
    allocations: Sequence[AllocRef] = (),
    taint_rules: Sequence[DeviceTaintRule] = (),
    problems: Sequence[str] = (),
    options: EngineOptions | None = None,
    previous: Mapping[str, Condition] | None = None,
    now: str | None = None,
    prepared: PreparedPool | None = None,
    nodes: Sequence[NodeInfo] | None = None,
    aborts: Aborts = NO_ABORTS,
) -> PoolResult:
    """Everything draview reports about one pool. `previous` keeps condition times;
    `prepared` (from an earlier result of the same slices) skips the slice-only work;
    `nodes` are the cluster's nodes (None: unknown, see engine/node_views.py); `aborts`: the
    nodes that gather an invalid pool, which 1.34's scheduler aborts on (aborts.py)."""
    opts = options or EngineOptions()
    profile_rules = rules_for(opts.profile)
    if prepared is None or not prepared.serves(slices, nodes, profile_rules):
        prepared = prepare_pool(key, slices, nodes, profile_rules)
    ps = prepared.ps
    errors = ValidationErrors(
        allocator=prepared.allocator_errors(), other=list(prepared.slice_errors)
    )
    errors.other.extend(problems)
    by_device = _by_device(allocations)
    comp = _PoolComputation(
        key, prepared, by_device, _taint_rules(key, taint_rules, profile_rules), opts, aborts
    )
    _check_allocations(ps, prepared.parsed, by_device, comp.consumed, comp.consumed_fmt, errors)
    pool_acc = SummaryAcc()
    slice_results = _judge_slices(prepared, comp, pool_acc)
    if comp.has_capacity:
        _capacity_overcommit(slice_results, errors)
    all_errors = errors.all()
    conditions = _conditions(prepared, slice_results, len(all_errors), previous, now)
    conditions.extend(_abort_conditions(comp, previous, now))
    _attach_brief(ps, slice_results, conditions, all_errors)
    summary = pool_acc.render()
    pool_body = _pool_body(ps, conditions, summary, all_errors, comp)
    parts = _partitions(key, ps, slice_results, comp, opts)
    if parts:
        pool_body["partitions"] = parts
    if (comp.sets or comp.has_capacity) and opts.fragmentation:
        frag = _fragmentation(
            prepared, slice_results, pool_body, comp.has_capacity, comp.parsed.per_slice
        )
        if frag:
            pool_body["fragmentation"] = frag
    named = {s.node_name for s in ps.current} or {s.node_name for s in ps.stale}
    node_name = named.pop() if len(named) == 1 else None
    return PoolResult(
        key,
        ps,
        pool_body,
        slice_results,
        node_name,
        errors,
        _states(summary),
        prepared,
        comp.alloc,
        comp.lefts,
    )


def _by_device(allocations: Sequence[AllocRef]) -> dict[str, list[AllocRef]]:
    by_device: dict[str, list[AllocRef]] = defaultdict(list)
    for ref in allocations:
        by_device[ref.device].append(ref)
    return by_device


def _taint_rules(
    key: PoolKey, taint_rules: Sequence[DeviceTaintRule], profile_rules: Rules
) -> list[DeviceTaintRule]:
    """The DeviceTaintRules that apply to the pool's devices under the profile."""
    return [r for r in taint_rules if r.matches(*key)] if profile_rules.taint_rules else []


def _fragmentation(
    prepared: PreparedPool,
    slice_results: Sequence[SliceResult],
    body: PoolStatusBody,
    has_capacity: bool,
    per_slice: bool,
) -> list[FragmentStatus]:
    """Free counter and shareable capacity that no single device can use (fragmentation.py),
    over the current slices' devices as judged."""
    current = slice_results[: len(prepared.current)]
    counters: list[Fragment] = []
    sets = body.get("counterSets") or []
    if sets:
        # Only devices that are still allocatable can take a counter's free capacity.
        pairs: dict[str, list[tuple[Device, str]]] = defaultdict(list)
        for fs, sr in zip(prepared.flat, current, strict=False):
            free = {d["name"] for d in sr.status["devices"] if d["state"] == "Available"}
            # Per slice (1.34) a device draws from its own slice's sets, named "slice/set"
            # in the pool body.
            own = f"{fs.slice.name}/" if per_slice else ""
            pairs[own].extend((dev, "Available") for dev in fs.devices if dev.name in free)
        if not per_slice:
            counters = fragments(sets, pairs[""])
        else:
            for own, devices in sorted(pairs.items()):
                mine = [
                    {**cs, "name": cs["name"][len(own) :]}
                    for cs in sets
                    if cs["name"].startswith(own)
                ]
                counters.extend(
                    replace(f, counter_set=own + f.counter_set) for f in fragments(mine, devices)
                )
    capacity = (
        capacity_fragments(d for sr in current for d in sr.status["devices"])
        if has_capacity
        else []
    )
    return status_entries(counters, capacity)


def _judge_slices(
    prepared: PreparedPool, comp: _PoolComputation, pool_acc: SummaryAcc
) -> list[SliceResult]:
    """Every slice's devices and summary; only current slices count for the pool."""
    out: list[SliceResult] = []
    for i, fs in enumerate(prepared.flat):
        is_stale = i >= len(prepared.current)
        acc = SummaryAcc()
        devices = comp.devices(i, acc, None if is_stale else pool_acc)
        body: SliceStatusBody = {
            "observedGeneration": fs.slice.generation,
            "devices": devices,
            "summary": acc.render(),
        }
        if fs.counter_sets and not is_stale:
            # Per slice (1.34) the pool's sets are named "slice/set"; a slice shows its own.
            own = f"{fs.slice.name}/" if comp.parsed.per_slice else ""
            # The counters are the pool body's own dicts, not copies (a MIG pool renders
            # over a hundred on every claim change): nothing changes a judged body in
            # place (budget.fit_object copies what it cuts), and the YAML output spells
            # shared parts out (cli/output.py: no anchors).
            body["counterSets"] = [
                {**comp.sets[own + c.name], "name": c.name} for c in fs.counter_sets
            ]
        out.append(SliceResult(fs.slice, body))
    return out


def _conditions(
    prepared: PreparedPool,
    slice_results: Sequence[SliceResult],
    errors: int,
    previous: Mapping[str, Condition] | None,
    now: str | None,
) -> list[Condition]:
    ps = prepared.ps
    conditions = pool_conditions(
        observed=len(ps.current),
        expected=ps.expected,
        generation=ps.generation,
        errors=errors,
        previous=previous,
        now=now,
    )
    conditions.append(as_condition(prepared.node_views, previous, now))
    return conditions


def _abort_conditions(
    comp: _PoolComputation, previous: Mapping[str, Condition] | None, now: str | None
) -> list[Condition]:
    """AbortedByInvalidPools, on a pool some of whose devices an invalid pool refuses."""
    if not comp.aborts:
        return []
    reasons = Counter(r for _, r in comp.judgement.verdicts.values())
    if not (reasons[ABORTS] or reasons[MAY_ABORT]):
        return []
    return [abort_condition(comp.aborts, reasons[ABORTS], reasons[MAY_ABORT], previous, now)]


def _attach_brief(
    ps: PoolSlices,
    slice_results: Sequence[SliceResult],
    conditions: Sequence[Condition],
    all_errors: list[str],
) -> None:
    """The pool's status in brief, on its first slice's status."""
    # Separate copies: the same list in two places would become a YAML anchor.
    brief: PoolStatusBrief = {
        "conditions": [Condition(**c) for c in conditions],
        "observedSliceCount": len(ps.current),
        "expectedSliceCount": ps.expected,
    }
    if all_errors:
        brief["validationErrors"] = list(all_errors)
    for sr in slice_results:
        if sr.slice.name == ps.first_slice:
            sr.status["poolStatus"] = brief


def _pool_body(
    ps: PoolSlices,
    conditions: list[Condition],
    summary: Summary,
    all_errors: list[str],
    comp: _PoolComputation,
) -> PoolStatusBody:
    body: PoolStatusBody = {
        "generation": ps.generation,
        "slices": [s.name for s in ps.current],
        "observedSliceCount": len(ps.current),
        "expectedSliceCount": ps.expected,
        "conditions": conditions,
        "summary": summary,
    }
    if all_errors:
        body["validationErrors"] = all_errors
    if comp.sets:
        body["counterSets"] = [comp.sets[name] for name in sorted(comp.sets)]
    body["profile"] = comp.options.profile.as_status()
    return body


def _states(summary: Summary) -> dict[str, int]:
    return {
        "Available": summary["availableDevices"],
        "Allocated": summary["allocatedDevices"] - summary["partiallyAllocatedDevices"],
        "PartiallyAllocated": summary["partiallyAllocatedDevices"],
        "Unavailable": summary["unavailableDevices"],
    }


def _capacity_overcommit(slices: Sequence[SliceResult], errors: ValidationErrors) -> None:
    for sr in slices:
        for d in sr.status["devices"]:
            for name, left in d.get("availableCapacity", {}).items():
                if left.startswith("-"):
                    errors.other.append(
                        f"CapacityOvercommitted: device {d['name']} capacity {name}: "
                        f"allocations exceed {d.get('capacity', {}).get(name, '?')} by "
                        f"{left[1:]}"
                    )


def _partitions(
    key: PoolKey,
    ps: PoolSlices,
    slice_results: Sequence[SliceResult],
    comp: _PoolComputation,
    opts: EngineOptions,
) -> list[Partition]:
    attrs = tuple(
        dict.fromkeys(
            [s.partition_type_attribute for s in ps.current if s.partition_type_attribute]
            + list(opts.partition_attributes)
        )
    )
    if not attrs:
        return []
    n_current = len(ps.current)
    # Until 1.35 a tainted device the search meets keeps the counters it reserved
    # (rules.refusals_release_counters): only a first-fit search can count its type.
    leaks = not comp.prepared.rules.refusals_release_counters
    inputs = [
        PartitionInput(
            comp.flat[i].devices[j],
            # What fits when no node meets an invalid pool first (aborts.py): counted as
            # if free, the type then says the count depends on the order.
            _lucky(d) if d.get("stateReason") == MAY_ABORT else d["state"],
            comp.debits(i, j),
            (i, j),
            i < n_current,
            d.get("stateReason") == "UnsupportedNodeSelector"
            or (leaks and d.get("stateReason") == "Tainted" and bool(comp.debits(i, j))),
        )
        for i, sr in enumerate(slice_results)
        for j, d in enumerate(sr.status["devices"])
    ]
    # The judgement keeps counters as nanos; the partition search works on quantities.
    views = [
        (handed, {k: Quantity(n) for k, n in left.items()}, groups)
        for handed, left, groups in comp.judgement.free_by_view
    ]
    parts = partitions(key[0], attrs, inputs, views, opts.exact_partition_limit)
    if comp.alloc.recheck_first:
        first_fit_per_slice(parts, key[0], inputs, comp.flat, comp.alloc.capacity)
    if comp.aborts:
        judged = comp.judgement
        aborted_partitions(
            parts, key[0], inputs, judged.offers, comp.prepared.tiers, judged.verdicts, comp.aborts
        )
    return parts


def _lucky(d: DeviceStatus) -> DeviceState:
    return "PartiallyAllocated" if d.get("allocations") else "Available"
