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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from draview.api.status import DeviceStatus
from draview.api.taints import DeviceTaintRule
from draview.engine.model import AllocRef, EngineOptions, PoolKey
from draview.engine.node_views import View
from draview.engine.pool import PreparedPool, _by_device, _PoolComputation, _taint_rules
from draview.engine.rules import rules_for
from draview.engine.summary import SummaryAcc
from draview.engine.validate import CounterKey
from draview.engine.verdict import Judgement, judge_again, judged_apart, overdrawn, some_judged


@dataclass(frozen=True, slots=True)
class _Basis:
    """What a judgement leaves for judging the same pool again (`device_statuses`)."""

    prepared: PreparedPool
    rules: tuple[DeviceTaintRule, ...]
    options: EngineOptions
    by_device: Mapping[str, list[AllocRef]]
    overdrawn: bool


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
    view = _apart(comp)
    basis = (
        None if view is None else _Basis(prepared, rules, options, by_device, overdrawn(comp.left))
    )
    return JudgedDevices(statuses, comp.left, None, basis)


def _apart(comp: _PoolComputation) -> View | None:
    """The pool's one view, when each device's verdict in it depends only on its own
    allocations and counters; else None."""
    prepared = comp.prepared
    if len(prepared.views) != 1 or prepared.composite:
        return None  # composite devices: a source in use refuses others
    view = prepared.views[0]
    return view if judged_apart(view, prepared.parsed, comp.alloc, prepared.rules) else None


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
    # Counted from scratch (a sum over the devices in use), but nothing judged yet.
    unjudged = Judgement({}, [], set(), {}, [])
    comp = _PoolComputation(key, prepared, by_device, rules, options, judged=unjudged)
    left = comp.left
    if overdrawn(left) != basis.overdrawn:
        return None
    view = _apart(comp)
    if view is None:
        return None
    moved = {k for k, n in left.items() if before.left.get(k) != n}
    consumption = prepared.parsed.consumption
    flat, current = prepared.flat, len(prepared.current)
    places = []
    for at in view.targets:
        i, j = at
        if i >= current:
            continue  # a stale slice's device: never shown
        name = flat[i].devices[j].name
        if name in names or (moved and any(k in moved for k, _ in consumption.get(name, ()))):
            places.append(at)
    verdicts = judge_again(
        view, flat, comp.alloc, comp.tainted, comp.composite.blocked, left, places, prepared.rules
    )
    # A device the view does not hand out still lists its holders.
    shown = {flat[i].devices[j].name for i, j in places}
    if not names <= shown:
        for i in range(current):
            for j, dev in enumerate(flat[i].devices):
                if dev.name in names and dev.name not in shown:
                    places.append((i, j))
    comp.judgement = some_judged(view, flat, verdicts)
    statuses = [list(s) for s in before.statuses]
    by_slice: dict[int, list[int]] = {}
    for i, j in places:
        by_slice.setdefault(i, []).append(j)
    acc = SummaryAcc()
    for i, js in by_slice.items():
        for j, status in zip(js, comp.devices(i, acc, None, js), strict=True):
            statuses[i][j] = status
    basis = _Basis(prepared, rules, options, by_device, basis.overdrawn)
    return JudgedDevices(statuses, left, places, basis)
