"""Could one more claim get this device? The allocator's per-device checks, per node view.

Mirrors, for a claim pinned to one device (see capacity.probe_request for what it asks of
a shareable device): the scheduler's allocated state (foreachAllocatedDevice), the
allocator's skipping of incomplete and invalid pools, `deviceInUse`,
`CmpRequestOverCapacity`, `checkAvailableCounters` and `taintPreventsAllocation`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from draview.api.slices import Device
from draview.engine.capacity import capacity_fits, probe_requests, request_fits
from draview.engine.compat import Intersection, admit, baseline, uses_of
from draview.engine.flatten import FlatSlice
from draview.engine.model import AllocRef
from draview.engine.node_views import View, first_choices
from draview.engine.rules import REFERENCE, Rules
from draview.engine.validate import CounterKey, ParsedPool
from draview.quantity import Quantity, try_parse_quantity

# Reasons a node view refuses a device, most specific last: across nodes, draview
# reports the one from the node that came closest to handing the device out.
RANKS = {
    "Unreachable": 0,
    "StaleGeneration": 1,
    "PoolIncomplete": 2,
    "PoolInvalid": 3,
    "InUse": 4,
    "InsufficientCapacity": 5,
    "Tainted": 6,
    "CounterOvercommitted": 7,
    "InsufficientSharedCapacity": 8,
    "CountersChargedPerShare": 8,
    "CapacitySourceInUse": 9,
    "UnsupportedNodeSelector": 10,
    "CompatibilityGroupConflict": 10,
    "NodeLacksOptionalNodeOperations": 10,
    "BindingConditionsDisabled": 11,
    "OptionalNodeOperationsDisabled": 11,
    "CompatibilityGroupsDisabled": 11,
    "PartitionableDevicesDisabled": 11,
    "SliceHoldsCounterSets": 11,
}
Verdict = tuple[str, str | None]
# The reason of a device the allocator never looks at, its slice holding counter sets
# (FlatSlice.counters_only).
COUNTERS_ONLY = "SliceHoldsCounterSets"
FreeView = tuple[set[tuple[int, int]], Mapping[CounterKey, int], Mapping[str, Intersection] | None]
_YES: Verdict = ("yes", None)
_KIND_REASON = {
    "obsolete": "StaleGeneration",
    "incomplete": "PoolIncomplete",
    "invalid": "PoolInvalid",
}


@dataclass(slots=True)
class AllocatedState:
    """The scheduler's AllocatedState, for one pool, keyed by device name."""

    dedicated: set[str] = field(default_factory=set)  # results without shareID
    shared: set[str] = field(default_factory=set)  # results with a shareID
    # consumedCapacity of shared results, summed; only results that carry some
    capacity: dict[str, dict[str, Quantity]] = field(default_factory=dict)
    # Shareable devices whose counters a share already debited, so another share skips
    # the counter check (deviceCapacityInUse): until 1.36 only shares that carry
    # consumedCapacity count; from 1.37 every share (rules.shares_debit_once).
    debited: set[str] = field(default_factory=set)
    # Whether devices held only by shares debit their counters (rules.shares_debit_counters).
    shares_debit: bool = True
    # 1.34 checks capacity a second time against the slice's first device instead of the
    # one asked for (rules.capacity_recheck_own_device off).
    recheck_first: bool = False

    @classmethod
    def of(
        cls,
        refs: Iterable[AllocRef],
        shareable: bool = True,
        shares_debit_once: bool = False,
        shares_debit_counters: bool = True,
        shares_skip_counter_check: bool = True,
        capacity_recheck_own_device: bool = True,
    ) -> AllocatedState:
        """shareable False (DRAConsumableCapacity off): every share is a whole allocation.
        shares_debit_once: a share without consumedCapacity also marks its device's
        counters as debited (1.37). shares_debit_counters False (1.34, 1.35): only
        results without shareID debit counters. shares_skip_counter_check False (1.34):
        no share marks its device debited, every new share is checked again."""
        st = cls(shares_debit=shares_debit_counters, recheck_first=not capacity_recheck_own_device)
        st._take(refs, shareable, shares_debit_once, shares_skip_counter_check)
        return st

    def _take(
        self,
        refs: Iterable[AllocRef],
        shareable: bool,
        shares_debit_once: bool,
        shares_skip_counter_check: bool,
    ) -> None:
        for r in refs:
            if r.admin_access:
                continue  # never makes a device used
            if r.share_id is None or not shareable:
                self.dedicated.add(r.device)
                continue
            self.shared.add(r.device)
            if shares_debit_once and shares_skip_counter_check:
                self.debited.add(r.device)
            if r.consumed:
                if shares_skip_counter_check:
                    self.debited.add(r.device)
                into = self.capacity.setdefault(r.device, {})
                for name, text in r.consumed:
                    q = try_parse_quantity(text)
                    if q is not None:
                        into[name] = into[name] + q if name in into else q

    @classmethod
    def for_rules(cls, refs: Iterable[AllocRef], rules: Rules) -> AllocatedState:
        """`of` with what the profile's scheduler makes of shares."""
        return cls.of(
            refs,
            rules.shareable,
            rules.shares_debit_once,
            rules.shares_debit_counters,
            rules.shares_skip_counter_check,
            rules.capacity_recheck_own_device,
        )

    def plus(self, refs: Iterable[AllocRef], rules: Rules) -> AllocatedState:
        """This state (for_rules of some refs) with `refs` added: for_rules of both, without
        going over the first again (fit adds a copy's few devices to a pool's state)."""
        st = AllocatedState(
            set(self.dedicated),
            set(self.shared),
            {name: dict(used) for name, used in self.capacity.items()},
            set(self.debited),
            self.shares_debit,
            self.recheck_first,
        )
        st._take(refs, rules.shareable, rules.shares_debit_once, rules.shares_skip_counter_check)
        return st

    def used(self, name: str) -> bool:
        """Any non-admin result holds the device."""
        return name in self.dedicated or name in self.shared or name in self.capacity

    def held(self) -> set[str]:
        """The devices `used` answers yes for, by set unions in C (once per judgement)."""
        out = self.dedicated | self.shared
        if self.capacity:
            out.update(self.capacity)
        return out

    def debiting(self, held: set[str]) -> set[str]:
        """Of `held` (from held()), the devices `debits` charges."""
        return held if self.shares_debit else self.dedicated & held

    def debits(self, name: str) -> bool:
        """Whether checkAvailableCounters charges the device's counters: from 1.36
        (IsDeviceAllocated) whenever it is used; in 1.35 only when a result without
        shareID holds it (AllocatedDevices)."""
        return name in self.dedicated or (self.shares_debit and self.used(name))


def counters_left(parsed: ParsedPool, state: AllocatedState) -> dict[CounterKey, int]:
    """What is left of every counter of the parse, in nanos, once every device instance
    in use has debited it (checkAvailableCounters' view; compared, never printed)."""
    left = {k: q.nanos for k, q in parsed.counter_totals.items()}
    # By the names that debit (the devices in use, a few) rather than every instance.
    for name in state.debiting(state.held()):
        for debits in parsed.counted_of(name):
            for key, q in debits:
                if key in left:
                    left[key] -= q.nanos
    return left


def groups_in_use(
    parsed: ParsedPool, state: AllocatedState, rules: Rules
) -> dict[str, Intersection] | None:
    """The compatibility groups the allocated devices leave open, per counter set; None
    where nothing is checked (the feature off, or no device of the view names a group)."""
    if not (rules.compatibility_groups and parsed.group_uses):
        return None
    return baseline(parsed.group_uses, state.used)


@dataclass(slots=True)
class ViewCheck:
    """One ok outcome of a view with its counters left, ready to judge devices."""

    parsed: ParsedPool
    left: Mapping[CounterKey, int]  # nanos: compared per device on every claim change
    overcommitted: bool
    groups: Mapping[str, Intersection] | None = None  # see groups_in_use

    def refusals(
        self,
        devs: Sequence[Device],
        tainted: Sequence[bool] | None,
        state: AllocatedState,
        composite_blocked: Callable[[Device], bool],
        rules: Rules = REFERENCE,
    ) -> list[str | None]:
        """Why this view refuses each device (None: it would hand it out). One loop, every
        lookup hoisted (debits too: `ParsedPool.needs`): it runs on every claim change."""
        dedicated, shared, used_capacity = state.dedicated, state.shared, state.capacity
        debited, left, overcommitted = state.debited, self.left, self.overcommitted
        summed, consumption = self.parsed.needs_summed, self.parsed.consumption
        policies, has_policy = self.parsed.policy_cache, self.parsed.has_policy
        partitionable, groups = self.parsed.partitionable, self.groups
        unbound, fractional = not rules.binding_conditions, rules.fractional_capacity_range
        out: list[str | None] = []
        append = out.append
        for k, dev in enumerate(devs):
            name = dev.name
            if name in dedicated:
                append("InUse")
                continue
            if unbound and dev.binding is not None and dev.binding.conditions:
                # isSelectable: never a candidate while the scheduler cannot bind it.
                append("BindingConditionsDisabled")
                continue
            multi = dev.allow_multiple_allocations
            if dev.capacity:
                # Few pools hold shared capacity: no lookup where none is held.
                used = used_capacity.get(name) if used_capacity else None
                # A device taken whole, with nothing shared and no policy, always fits.
                check = used or multi
                if not check:
                    known = policies.get(id(dev.capacity))
                    check = has_policy(dev) if known is None else known
                if check and not capacity_fits(dev, used, fractional):
                    append("InsufficientCapacity")
                    continue
            if tainted is not None and tainted[k]:
                append("Tainted")
                continue
            if dev.consumes_counters and not partitionable:
                append("PartitionableDevicesDisabled")
                continue
            # A share of a device already debited skips the check (AllocatedState.debited).
            if dev.consumes_counters and not (multi and name in debited):
                if groups is not None and admit(groups, uses_of(dev.consumes_counters)) is None:
                    append("CompatibilityGroupConflict")
                    continue
                short = False
                for key, q in (summed and summed.get(name)) or consumption.get(name) or ():
                    have = left.get(key)
                    if have is not None and have < q.nanos:
                        short = True
                        break
                if short:
                    # Until 1.37 a share without consumedCapacity is charged again.
                    per_share = multi and name in shared
                    append("CountersChargedPerShare" if per_share else "InsufficientSharedCapacity")
                    continue
                if overcommitted:
                    append("CounterOvercommitted")
                    continue
            if dev.composite and composite_blocked(dev):
                append("CapacitySourceInUse")
                continue
            append(None)
        return out


@dataclass(slots=True)
class Judgement:
    """Per device (slice index, device index): allocatable on some node for every list
    order ("yes"), for some orders only ("maybe"), or not, with the reason. Devices no
    view hands out are absent (see `verdict`)."""

    verdicts: dict[tuple[int, int], Verdict]
    # Per view that can hand out devices: the devices it would hand out, the counters it
    # has left (nanos) and the compatibility groups open, for the partition figures.
    free_by_view: list[FreeView]
    # Slices that reach some node but are older than what that node's view uses.
    stale: set[int]
    # Slices the profile's GatherPools skips, with why (FlatSlice.ignored).
    ignored: Mapping[int, str] = field(default_factory=dict)
    # Per view: its nodes and the devices it would hand out (engine/aborts.py).
    offers: list[tuple[tuple[str | None, ...], set[tuple[int, int]]]] = field(default_factory=list)

    def verdict(self, at: tuple[int, int]) -> Verdict:
        found = self.verdicts.get(at)
        if found is not None:
            return found
        skipped = self.ignored.get(at[0])
        if skipped is not None:
            return ("no", skipped)
        return ("no", "StaleGeneration" if at[0] in self.stale else "Unreachable")


def judge(
    views: Iterable[View],
    flat: Sequence[FlatSlice],
    state: AllocatedState,
    tainted: Callable[[int, int], bool] | None,
    composite_blocked: Callable[[Device], bool],
    left_for: Callable[[ParsedPool], Mapping[CounterKey, int]],
    rules: Rules = REFERENCE,
) -> Judgement:
    """`tainted` None: nothing in the pool can be tainted. `left_for` gives the counters
    left under one parse of the pool (the caller may already have them). `rules`: the
    profile's (engine/rules.py)."""
    views = tuple(views)
    # Where slices disagree on resourceSliceCount, each view's answer depends on the list
    # order, and two views' answers on the same order: keep every view's per-count
    # answers and settle each device over the orders that can happen (_settle).
    ambiguous = any(len(v.outcomes) > 1 for v in views)
    run = _Judging(flat, state, tainted, composite_blocked, ambiguous, rules)
    for vi, view in enumerate(views):
        run.view(vi, view, _checks(view, left_for, state, rules))
    if run.per_count:
        _settle(run.best, run.per_count, first_choices([v.first for v in views]))
    return Judgement(run.best, run.free_by_view, run.stale, _ignored(flat), run.offers)


def _ignored(flat: Sequence[FlatSlice]) -> dict[int, str]:
    ignored = {i: fs.ignored for i, fs in enumerate(flat) if fs.ignored}
    ignored.update((i, COUNTERS_ONLY) for i, fs in enumerate(flat) if fs.counters_only)
    return ignored


def some_judged(
    view: View, flat: Sequence[FlatSlice], verdicts: dict[tuple[int, int], Verdict]
) -> Judgement:
    """A judgement of the pool's one view holding the verdicts of some of its targets
    (judge_again): enough to render those devices, and any device it does not hand
    out; nothing else."""
    return Judgement(verdicts, [], set(view.stale), _ignored(flat), [])


def judged_apart(view: View, parsed: ParsedPool, state: AllocatedState, rules: Rules) -> bool:
    """Whether each device's verdict in this view depends on the allocations only
    through its own (who holds it, its capacity and shares) and the counters it
    debits, so that after a change only those devices need judging again
    (`judge_again`): one count trusted, the pool's own parse counted as a whole (not
    per slice, 1.34), no compatibility groups, no second capacity check against
    another device (1.34) and no slice whose node operations the profile refuses."""
    outcomes = view.outcomes
    return (
        len(outcomes) == 1
        and outcomes[0].kind == "ok"
        and outcomes[0].parsed is parsed
        and not parsed.errors
        and not parsed.per_slice
        and not (rules.compatibility_groups and parsed.group_uses)
        and not state.recheck_first
        and not rules.node_operations_checked
    )


def judge_again(
    view: View,
    flat: Sequence[FlatSlice],
    state: AllocatedState,
    tainted: Callable[[int, int], bool] | None,
    composite_blocked: Callable[[Device], bool],
    left: Mapping[CounterKey, int],
    places: Sequence[tuple[int, int]],
    rules: Rules = REFERENCE,
) -> dict[tuple[int, int], Verdict]:
    """The verdicts of the devices at `places` (targets of the view) as `judge` gives
    them under `state` and `left`, for a pool of this one view (`judged_apart`)."""
    parsed = view.outcomes[0].parsed
    assert parsed is not None
    check = ViewCheck(parsed, left, overdrawn(left))
    devs = [flat[i].devices[j] for i, j in places]
    taints = [tainted(*at) for at in places] if tainted is not None else None
    unsupported = view.unsupported
    out: dict[tuple[int, int], Verdict] = {}
    reasons = check.refusals(devs, taints, state, composite_blocked, rules)
    for at, r in zip(places, reasons, strict=True):
        if r is None and unsupported and at in unsupported:
            r = "UnsupportedNodeSelector"
        out[at] = ("no", r) if r is not None else _YES
    return out


def overdrawn(left: Mapping[CounterKey, int]) -> bool:
    """Some counter is below zero: a view that counts the pool's counters as a whole
    refuses every device that debits any."""
    return bool(left) and min(left.values()) < 0


def _checks(
    view: View,
    left_for: Callable[[ParsedPool], Mapping[CounterKey, int]],
    state: AllocatedState,
    rules: Rules,
) -> list[ViewCheck | str]:
    """One check per count the view may trust: a ViewCheck, or the reason it refuses all."""
    checks: list[ViewCheck | str] = []
    for o in view.outcomes:
        if o.kind == "ok" and o.parsed is not None:
            left = left_for(o.parsed)
            # Per slice (1.34) an overdrawn counter refuses only its slice's devices,
            # which their zero debits on it already say.
            over = not o.parsed.per_slice and overdrawn(left)
            checks.append(ViewCheck(o.parsed, left, over, groups_in_use(o.parsed, state, rules)))
        else:
            checks.append(_KIND_REASON[o.kind])
    return checks


@dataclass(slots=True)
class _Judging:
    """One judge() call: the best verdict so far per device, across the views seen."""

    flat: Sequence[FlatSlice]
    state: AllocatedState
    tainted: Callable[[int, int], bool] | None
    blocked: Callable[[Device], bool]
    ambiguous: bool
    rules: Rules
    best: dict[tuple[int, int], Verdict] = field(default_factory=dict)
    free_by_view: list[FreeView] = field(default_factory=list)
    stale: set[int] = field(default_factory=set)
    per_count: dict[tuple[int, int], list[tuple[int, list[str | None]]]] = field(
        default_factory=dict
    )
    offers: list[tuple[tuple[str | None, ...], set[tuple[int, int]]]] = field(default_factory=list)

    def view(self, vi: int, view: View, checks: list[ViewCheck | str]) -> None:
        self.stale.update(view.stale)
        targets = view.targets
        devs = [self.flat[i].devices[j] for i, j in targets]
        taints = [self.tainted(*at) for at in targets] if self.tainted is not None else None
        by_check: list[list[str | None]] = [
            [c] * len(targets)
            if isinstance(c, str)
            else c.refusals(devs, taints, self.state, self.blocked, self.rules)
            for c in checks
        ]
        if self.state.recheck_first:
            for reasons in by_check:
                for k, at in enumerate(targets):
                    if reasons[k] is None and not _rechecks_first(self.flat, at, self.state):
                        reasons[k] = "InsufficientCapacity"
        if self.rules.node_operations_checked:
            self._node_operations(view, targets, by_check)
        unsupported, best, per_count = view.unsupported, self.best, self.per_count
        free: set[tuple[int, int]] = set()
        fresh = not best  # the first view: nothing to compare with
        for k, at in enumerate(targets):
            verdict: Verdict
            if len(by_check) == 1:
                # One count to trust, as in almost every pool: no lists to build.
                r = by_check[0][k]
                if r is None and unsupported and at in unsupported:
                    r = "UnsupportedNodeSelector"
                verdict = ("no", r) if r is not None else _YES
                if self.ambiguous:
                    per_count.setdefault(at, []).append((vi, [r]))
            else:
                reasons = [a[k] for a in by_check]
                if at in unsupported:
                    reasons = [r or "UnsupportedNodeSelector" for r in reasons]
                per_count.setdefault(at, []).append((vi, reasons))
                verdict = _of_counts(reasons)
            if verdict is _YES:
                free.add(at)
            before = None if fresh else best.get(at)
            best[at] = verdict if before is None else _better(before, verdict)
        self.offers.append((view.nodes, free))
        first_ok = next((c for c in checks if isinstance(c, ViewCheck)), None)
        if free and first_ok is not None:
            self.free_by_view.append((free, first_ok.left, first_ok.groups))

    def _node_operations(
        self, view: View, targets: Sequence[tuple[int, int]], by_check: list[list[str | None]]
    ) -> None:
        """1.37's experimental allocateDevice refuses a device of a slice with
        skipNodeOperations right after the in-use checks, unless the scheduler has optional
        node operations and the node declares them."""
        if self.rules.optional_node_operations:
            if not view.lacks_node_operations:
                return
            reason = "NodeLacksOptionalNodeOperations"
        else:
            reason = "OptionalNodeOperationsDisabled"
        flat = self.flat
        for k, at in enumerate(targets):
            if flat[at[0]].slice.skip_node_operations:
                for reasons in by_check:
                    if reasons[k] not in _DECIDED_EARLIER:
                        reasons[k] = reason


# Refusals the allocator reaches before allocateDevice's node-operations check.
_DECIDED_EARLIER = frozenset(
    {
        "InUse",
        "InsufficientCapacity",
        "BindingConditionsDisabled",
        "PoolIncomplete",
        "PoolInvalid",
        "StaleGeneration",
    }
)


def _rechecks_first(flat: Sequence[FlatSlice], at: tuple[int, int], state: AllocatedState) -> bool:
    """1.34's allocateDevice checks capacity again with the probe's request, but against
    the slice's device at the request's device index (0 for one device): the first."""
    devices = flat[at[0]].devices
    first = devices[0]
    return (
        request_fits(first, probe_requests(devices[at[1]]), state.capacity.get(first.name)) is True
    )


def _of_counts(reasons: list[str | None]) -> Verdict:
    """A view's answer when the count it trusts depends on the list order."""
    found = [r for r in reasons if r is not None]
    if not found:
        return _YES
    if len(found) < len(reasons):
        return ("maybe", "InconsistentSliceCount")
    return ("no", max(found, key=RANKS.__getitem__))


def _settle(
    best: dict[tuple[int, int], Verdict],
    per_count: dict[tuple[int, int], list[tuple[int, list[str | None]]]],
    orders: list[tuple[int, ...]],
) -> None:
    """Each device over the list orders that can happen: in each, a view trusts one count."""
    for at, answers in per_count.items():
        fits = [
            any(reasons[min(order[vi], len(reasons) - 1)] is None for vi, reasons in answers)
            for order in orders
        ]
        if all(fits):
            best[at] = _YES
        elif any(fits):
            best[at] = ("maybe", "InconsistentSliceCount")
        elif best[at][0] != "no":
            reasons_seen = [r for _, rs in answers for r in rs if r is not None]
            best[at] = ("no", max(reasons_seen, key=RANKS.__getitem__))


_ORDER = {"yes": 2, "maybe": 1, "no": 0}


def _better(a: Verdict, b: Verdict) -> Verdict:
    """The answer across two nodes: the more allocatable; between two refusals, the one
    from the node that came closer."""
    if _ORDER[a[0]] != _ORDER[b[0]]:
        return a if _ORDER[a[0]] > _ORDER[b[0]] else b
    if a[0] == "no" and b[1] is not None and a[1] is not None:
        return a if RANKS[a[1]] >= RANKS[b[1]] else b
    return a
