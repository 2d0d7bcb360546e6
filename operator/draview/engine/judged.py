"""A pool's devices judged again with other allocations, without the rest of its status:
what `fit` explains the next copy with (explain/fit_memo.py).

Asked again after a claim change, or after the copies moved, a pool differs from its
last judgement in a few devices: those whose holders changed and those that debit a
counter whose remainder changed. Where the pool's one view lets a device's verdict
depend on nothing else (verdict.judged_apart), only those devices are judged and
rendered again and every other status is the one judged before; elsewhere every device
is (tests/unit/test_judged.py compares the two on random pools).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from draview.api.status import DeviceStatus
from draview.api.taints import DeviceTaintRule
from draview.engine.model import AllocRef, EngineOptions, PoolKey
from draview.engine.node_views import View
from draview.engine.pool import (
    PoolResult,
    PreparedPool,
    _by_device,
    _PoolComputation,
    _taint_rules,
)
from draview.engine.rules import rules_for
from draview.engine.summary import SummaryAcc
from draview.engine.validate import CounterKey
from draview.engine.verdict import (
    AllocatedState,
    Judgement,
    judge_again,
    judged_apart,
    overdrawn,
    some_judged,
)
from draview.quantity import Quantity


@dataclass(frozen=True, slots=True)
class _Basis:
    """What a judgement leaves for judging the same pool again (`device_statuses`)."""

    prepared: PreparedPool
    rules: tuple[DeviceTaintRule, ...]
    options: EngineOptions
    by_device: Mapping[str, list[AllocRef]]
    overdrawn: bool
    debiting: frozenset[str]  # the devices in use whose debits `left` takes


@dataclass(frozen=True, slots=True)
class JudgedDevices:
    """A pool's newest devices as compute_pool judges them with some allocations: their
    statuses, one list per current slice in the slice's device order, and what is left of
    each counter (nanos)."""

    statuses: list[list[DeviceStatus]]
    left: Mapping[CounterKey, int]
    # The devices (slice and device index) judged again since the judgement this one
    # was made from; None: every one.
    changed: Sequence[tuple[int, int]] | None = None
    basis: _Basis | None = None


def device_statuses(
    key: PoolKey,
    prepared: PreparedPool,
    allocations: Sequence[AllocRef],
    taint_rules: Sequence[DeviceTaintRule],
    options: EngineOptions,
    before: JudgedDevices | None = None,
) -> JudgedDevices:
    """The devices of the current slices, judged as compute_pool judges them with
    `allocations`, without the rest of the pool's status (summaries, partitions,
    conditions, counter sets rendered): `fit` judges every pool its copies took devices
    in again only to explain the next copy. `prepared` must serve the options' profile
    (PreparedPool.serves), and pools must be judged apart (no aborts: from 1.35).
    `before`: this function's answer for the same slices with other allocations, which
    only the devices they change are judged again from, where the pool allows."""
    rules_now = rules_for(options.profile)
    if prepared.rules != rules_now or not rules_now.invalid_pool_is_node_local:
        raise ValueError(f"pool {key}: prepared for another profile, or judged with the world")
    rules = tuple(_taint_rules(key, taint_rules, prepared.rules))
    by_device = _by_device(allocations)
    basis = before.basis if before is not None else None
    if (
        before is not None
        and basis is not None
        and basis.prepared is prepared
        and basis.rules == rules
        and basis.options == options
    ):
        found = _again(key, prepared, by_device, rules, options, before, basis)
        if found is not None:
            return found
    comp = _PoolComputation(key, prepared, by_device, rules, options)
    acc = SummaryAcc()
    statuses = [comp.devices(i, acc, None) for i in range(len(prepared.current))]
    basis = None
    if _apart(comp) is not None:
        debiting = frozenset(comp.alloc.debiting(comp.in_use))
        basis = _Basis(prepared, rules, options, by_device, overdrawn(comp.left), debiting)
    return JudgedDevices(statuses, comp.left, None, basis)


def as_judged(
    r: PoolResult,
    allocations: Sequence[AllocRef],
    taint_rules: Sequence[DeviceTaintRule],
    options: EngineOptions,
) -> JudgedDevices | None:
    """The pool's own judgement as device_statuses gives it, for judging the pool
    again from it (`before`) rather than anew: `r` must be compute_pool's result with
    these `allocations`, taint rules and options (up to `fragmentation`, which touches
    no device). fit's copies take a few devices of a pool, so most of its devices keep
    the verdicts the world's judgement gave them. None where the result does not hold
    what that needs (no counters left of its newest slices as a whole, for one)."""
    prepared, alloc, lefts = r.prepared, r.allocated, r.lefts
    if prepared is None or alloc is None or lefts is None or prepared.parsed.errors:
        return None
    left = lefts.get(id(prepared.parsed))  # the computation's own count (_left_for)
    if left is None:
        return None
    rules = tuple(_taint_rules(r.key, taint_rules, prepared.rules))
    by_device = _by_device(allocations)
    debiting = frozenset(alloc.debiting(alloc.held() & by_device.keys()))
    statuses = [sr.status["devices"] for sr in r.slices[: len(prepared.current)]]
    basis = _Basis(prepared, rules, options, by_device, overdrawn(left), debiting)
    return JudgedDevices(statuses, left, None, basis)


def _apart(comp: _PoolComputation) -> View | None:
    """The pool's one view, when each device's verdict in it depends only on its own
    allocations and counters; else None."""
    prepared = comp.prepared
    if len(prepared.views) != 1 or prepared.composite:
        return None  # composite devices: a source in use refuses others
    view = prepared.views[0]
    return view if judged_apart(view, prepared.parsed, comp.alloc, prepared.rules) else None


def _short(debits: Sequence[tuple[CounterKey, Quantity]], left: Mapping[CounterKey, int]) -> bool:
    """Whether the counters left refuse a device with these debits (as refusals reads
    them)."""
    for key, q in debits:
        have = left.get(key)
        if have is not None and have < q.nanos:
            return True
    return False


def places_by_set(prepared: PreparedPool, view: View) -> Mapping[str, list[tuple[int, int]]]:
    """Where the devices of the pool's one view that consume from each counter set sit
    (slice and device index of the current slices): built once per prepared pool, about
    a pointer per device."""
    found = prepared.by_set.get(id(view))
    if found is not None:
        return found
    flat, current = prepared.flat, len(prepared.current)
    by_set: dict[str, list[tuple[int, int]]] = {}
    for at in view.targets:
        i, j = at
        if i >= current:
            continue  # a stale slice's device: never shown
        for cc in flat[i].devices[j].consumes_counters:
            places = by_set.get(cc.counter_set)
            if places is None:
                by_set[cc.counter_set] = [at]
            else:
                places.append(at)
    prepared.by_set[id(view)] = by_set
    return by_set


def _again(
    key: PoolKey,
    prepared: PreparedPool,
    by_device: Mapping[str, list[AllocRef]],
    rules: tuple[DeviceTaintRule, ...],
    options: EngineOptions,
    before: JudgedDevices,
    basis: _Basis,
) -> JudgedDevices | None:
    """`before` with the devices the allocations change judged again; None when the
    change reaches every device (a counter overdrawn, or no longer)."""
    old = basis.by_device
    names = {n for n in old.keys() | by_device.keys() if old.get(n) != by_device.get(n)}
    alloc = AllocatedState.for_rules((r for rs in by_device.values() for r in rs), prepared.rules)
    debiting = frozenset(alloc.debiting(alloc.held() & by_device.keys()))
    left, moved = _counted_again(prepared, before.left, basis.debiting, debiting)
    if overdrawn(left) != basis.overdrawn:
        return None
    # Nothing judged yet: the verdicts of the few devices judged again are set below.
    unjudged = Judgement({}, [], set(), {}, [])
    comp = _PoolComputation(
        key, prepared, by_device, rules, options, judged=unjudged, counted=(alloc, left)
    )
    view = _apart(comp)
    if view is None:
        return None
    places, unshown = _touched(prepared, view, names, moved, before.left, left)
    flat = prepared.flat
    verdicts = judge_again(
        view, flat, comp.alloc, comp.tainted, comp.composite.blocked, left, places, prepared.rules
    )
    comp.judgement = some_judged(view, flat, verdicts)
    places.extend(unshown)  # rendered, not judged: the view does not hand them out
    statuses = [list(s) for s in before.statuses]
    by_slice: dict[int, list[int]] = {}
    for i, j in places:
        by_slice.setdefault(i, []).append(j)
    acc = SummaryAcc()
    for i, js in by_slice.items():
        for j, status in zip(js, comp.devices(i, acc, None, js), strict=True):
            statuses[i][j] = status
    basis = _Basis(prepared, rules, options, by_device, basis.overdrawn, debiting)
    return JudgedDevices(statuses, left, places, basis)


def _counted_again(
    prepared: PreparedPool,
    left_before: Mapping[CounterKey, int],
    debiting_before: frozenset[str],
    debiting: frozenset[str],
) -> tuple[dict[CounterKey, int], set[str]]:
    """What is left of each counter: the last count, with the debits of the devices that
    started or stopped debiting given or taken (integer nanos: exact in any order); and
    the counter sets whose remainder moved."""
    consumption = prepared.parsed.consumption
    left = dict(left_before)
    delta: dict[CounterKey, int] = {}
    for name in debiting ^ debiting_before:
        sign = 1 if name in debiting_before else -1
        for ckey, q in consumption.get(name, ()):
            if ckey in left:
                delta[ckey] = delta.get(ckey, 0) + sign * q.nanos
    for ckey, n in delta.items():
        left[ckey] += n
    return left, {ckey[0] for ckey, n in delta.items() if n}


def _touched(
    prepared: PreparedPool,
    view: View,
    names: set[str],
    moved: set[str],
    left_before: Mapping[CounterKey, int],
    left: Mapping[CounterKey, int],
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The devices to judge again (slice and device index): those of the view named in
    `names` (their holders changed) and those of the counter sets in `moved` that the
    counters refuse now and did not before, or the other way (`left_before`, `left`);
    and apart, the current devices the view does not hand out that are named there (a
    status still lists its holders)."""
    flat, current = prepared.flat, len(prepared.current)
    # Pools judged apart count their counters as a whole (not per slice), so a
    # counter's set is the one its devices name: the devices that debit a counter that
    # moved are among those of its set. A device's status reads the counters only
    # through whether they refuse it (verdict.ViewCheck.refusals), so one whose answer
    # stays keeps its status.
    by_set = places_by_set(prepared, view)
    parsed = prepared.parsed
    summed, consumption = parsed.needs_summed, parsed.consumption
    picked: set[tuple[int, int]] = set()
    for s in moved:
        for at in by_set.get(s, ()):
            name = flat[at[0]].devices[at[1]].name
            debits = (summed and summed.get(name)) or consumption.get(name) or ()
            if name in names or _short(debits, left_before) != _short(debits, left):
                picked.add(at)
    # A named device that debits counters is among the places of its sets; the others
    # are looked for among every device the view hands out.
    sets: set[str] = set()
    among: Iterable[tuple[int, int]] = ()
    for name in names:
        own = consumption.get(name)
        if not own:
            among = view.targets
            break
        sets.update(ckey[0] for ckey, _ in own)
    else:
        among = [at for s in sets - moved for at in by_set.get(s, ())]
    picked.update(
        at for at in among if at[0] < current and flat[at[0]].devices[at[1]].name in names
    )
    places = sorted(picked)
    unshown: list[tuple[int, int]] = []
    shown = {flat[i].devices[j].name for i, j in places}
    if not names <= shown:
        for i in range(current):
            for j, dev in enumerate(flat[i].devices):
                if dev.name in names and dev.name not in shown:
                    unshown.append((i, j))
    return places, unshown
