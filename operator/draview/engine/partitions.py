"""Partition types of a pool (MIG profiles, TPU slices): how many more fit at once.

`allocatable` is the largest number of the type's devices a claim could still be given
that the counters left can hold together, on the best single node (one claim is served
from one node's view of the pool, never across nodes). Devices that share no counter are
independent, so the problem splits into components; a component with up to
`exact_limit` candidates is solved exactly (branch and bound), a larger one greedily
(smallest debit first), which is a lower bound and is reported as method "greedy".
Where the profile checks compatibility groups (engine/compat.py), the devices taken
together must also leave each counter set a common group.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from draview.api.slices import Device
from draview.api.status import DeviceState, Partition
from draview.engine.attributes import attribute
from draview.engine.capacity import request_fits
from draview.engine.compat import Intersection, admit, uses_of
from draview.engine.components import components
from draview.engine.flatten import FlatSlice
from draview.engine.validate import CounterKey
from draview.quantity import Quantity


@dataclass(frozen=True, slots=True)
class PartitionInput:
    device: Device
    state: DeviceState
    debits: Sequence[tuple[CounterKey, Quantity]]
    at: tuple[int, int]  # (slice index, device index) in the pool
    current: bool  # of the pool's newest generation (the ones `total` counts)
    # Refused alone only because its node selector has several terms: with a node-local
    # device ahead of it in a result the allocator takes it, otherwise it aborts. Or,
    # until 1.35, tainted after reserving counters it never gives back. Only the
    # first-fit search can tell, so no count of the type is exact.
    first_fit: bool = False


# A node view of the pool: the devices it would hand out, the counters it has left and
# the compatibility groups open per counter set (None: not checked).
ViewFree = tuple[
    set[tuple[int, int]], Mapping[CounterKey, Quantity], Mapping[str, Intersection] | None
]
# What a set of devices taken together leaves: counters, and groups where checked.
_State = tuple[dict[CounterKey, Quantity], Mapping[str, Intersection] | None]


def _components(cands: list[PartitionInput], by_set: bool) -> list[list[PartitionInput]]:
    """Devices linked by a counter they share (and, `by_set`, by a counter set they draw
    from, which compatibility groups tie together whatever the counters)."""

    def keys(c: PartitionInput) -> list[object]:
        out: list[object] = [key for key, _ in c.debits]
        if by_set:
            out.extend(("set", cc.counter_set) for cc in c.device.consumes_counters)
        return out

    return components(cands, keys)


def _fits(c: PartitionInput, state: _State) -> _State | None:
    left, groups = state
    after = dict(left)
    for key, q in c.debits:
        after[key] = after[key] - q
        if after[key].sign() < 0:
            return None
    if groups is None or not c.device.consumes_counters:
        return after, groups
    open_groups = admit(groups, uses_of(c.device.consumes_counters))
    return None if open_groups is None else (after, open_groups)


def _exact(cands: list[PartitionInput], start: _State) -> int:
    best = 0

    def go(i: int, taken: int, state: _State) -> None:
        nonlocal best
        if taken + (len(cands) - i) <= best:
            return
        if i == len(cands):
            best = taken
            return
        after = _fits(cands[i], state)
        if after is not None:
            go(i + 1, taken + 1, after)
        go(i + 1, taken, state)

    go(0, 0, start)
    return best


def _greedy(cands: list[PartitionInput], state: _State) -> int:
    taken = 0
    for c in sorted(cands, key=lambda c: (len(c.debits), c.device.name)):
        after = _fits(c, state)
        if after is not None:
            state, taken = after, taken + 1
    return taken


def _max_together(
    cands: list[PartitionInput],
    remaining: Callable[[CounterKey], Quantity],
    exact_limit: int,
    groups: Mapping[str, Intersection] | None = None,
) -> tuple[int, bool]:
    total, exact = 0, True
    for comp in _components(cands, groups is not None):
        start: _State = ({key: remaining(key) for c in comp for key, _ in c.debits}, groups)
        if len(comp) <= exact_limit:
            total += _exact(comp, start)
        else:
            total += _greedy(comp, start)
            exact = False
    return total, exact


def first_fit_per_slice(
    parts: list[Partition],
    driver: str,
    inputs: Sequence[PartitionInput],
    flat: Sequence[FlatSlice],
    used: Mapping[str, Mapping[str, Quantity]],
) -> None:
    """1.34 with consumable capacity re-checks the k-th device of a request against the
    device at index k of its slice (rules.capacity_recheck_own_device): a count n stays
    exact only where every slice holding the type has n devices and its first n each
    take a whole-device request (`used`: what shares hold); elsewhere only the
    first-fit search can tell."""

    def supplies(i: int, n: int) -> bool:
        devs = flat[i].devices
        return len(devs) >= n and all(
            request_fits(d, None, used.get(d.name)) is True for d in devs[:n]
        )

    for part in parts:
        n = part["allocatable"]
        if part["method"] != "exact" or n < 1:
            continue
        held = {
            i.at[0]
            for i in inputs
            if i.state in ("Available", "PartiallyAllocated")
            and str(attribute(i.device, driver, part["attribute"])) == part["type"]
        }
        if not all(supplies(s, n) for s in held):
            part["method"] = "firstFit"


def partitions(
    driver: str,
    attrs: Sequence[str],
    inputs: Sequence[PartitionInput],
    views: Sequence[ViewFree],
    exact_limit: int,
) -> list[Partition]:
    """One claim is allocated from one node's view of the pool, so what fits together is
    the best of the views, never a sum across nodes."""
    groups: dict[tuple[str, str], list[PartitionInput]] = defaultdict(list)
    for item in inputs:
        for name in attrs:
            value = attribute(item.device, driver, name)
            if value is not None:
                groups[(name, str(value))].append(item)
                break
    out: list[Partition] = []
    for (attr, value), items in sorted(groups.items()):
        # Whatever a claim could still be given, in use by shares or not.
        free = [i for i in items if i.state in ("Available", "PartiallyAllocated")]
        allocatable, exact = 0, True
        for handed, left, open_groups in views:
            mine = [i for i in free if i.at in handed]
            n, e = _max_together(mine, left.__getitem__, exact_limit, open_groups)
            if n > allocatable or (n == allocatable and not e):
                allocatable, exact = n, e
        out.append(
            {
                "type": value,
                "attribute": attr,
                "total": sum(1 for i in items if i.current),
                "available": sum(1 for i in free if i.current),
                "allocatable": allocatable,
                "method": "firstFit"
                if any(i.first_fit for i in items)
                else ("exact" if exact else "greedy"),
            }
        )
    return out
