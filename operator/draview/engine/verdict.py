"""Could one more claim get this device? The allocator's per-device checks, per node view.

Mirrors, for a claim pinned to one device (see capacity.probe_request for what it asks of
a shareable device): the scheduler's allocated state (foreachAllocatedDevice), the
allocator's skipping of incomplete and invalid pools, `deviceInUse`,
`CmpRequestOverCapacity`, `checkAvailableCounters` and `taintPreventsAllocation`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from draview.api.slices import Device
from draview.engine.capacity import capacity_fits
from draview.engine.model import AllocRef
from draview.engine.validate import CounterKey, ParsedPool
from draview.engine.views import View
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
}
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

    @classmethod
    def of(cls, refs: Iterable[AllocRef]) -> AllocatedState:
        st = cls()
        for r in refs:
            if r.admin_access:
                continue  # never makes a device used
            if r.share_id is None:
                st.dedicated.add(r.device)
                continue
            st.shared.add(r.device)
            if r.consumed:
                into = st.capacity.setdefault(r.device, {})
                for name, text in r.consumed:
                    q = try_parse_quantity(text)
                    if q is not None:
                        into[name] = into[name] + q if name in into else q
        return st

    def used(self, name: str) -> bool:
        """IsDeviceAllocated: any non-admin result makes the device debit its counters."""
        return name in self.dedicated or name in self.shared or name in self.capacity


def counters_left(parsed: ParsedPool, state: AllocatedState) -> dict[CounterKey, Quantity]:
    left = dict(parsed.counter_totals)
    for name, debits in parsed.counted:
        if state.used(name):
            for key, q in debits:
                if key in left:
                    left[key] = left[key] - q
    return left


@dataclass(slots=True)
class ViewCheck:
    """One ok outcome of a view with its counters left, ready to judge devices."""

    parsed: ParsedPool
    left: dict[CounterKey, Quantity]
    overcommitted: bool

    def refusal(
        self,
        dev: Device,
        state: AllocatedState,
        tainted: bool,
        composite_blocked: Callable[[Device], bool],
    ) -> str | None:
        name = dev.name
        if name in state.dedicated:
            return "InUse"
        if dev.capacity and not capacity_fits(dev, state.capacity.get(name)):
            return "InsufficientCapacity"
        if tainted:
            return "Tainted"
        # A share that already holds capacity skips the counter check (the counters
        # were debited with the first share); any other device checks them all.
        if dev.consumes_counters and not (
            dev.allow_multiple_allocations and name in state.capacity
        ):
            need: dict[CounterKey, Quantity] = {}
            for key, q in self.parsed.consumption.get(name, ()):
                need[key] = need[key] + q if key in need else q
            for key, q in need.items():
                if key in self.left and self.left[key] < q:
                    # Shares without consumedCapacity (what the scheduler writes for a
                    # device without capacity) do not count as "already shared", so the
                    # allocator charges the counters again for every share: upstream.
                    if dev.allow_multiple_allocations and name in state.shared:
                        return "CountersChargedPerShare"
                    return "InsufficientSharedCapacity"
            if self.overcommitted:
                return "CounterOvercommitted"
        if dev.composite and composite_blocked(dev):
            return "CapacitySourceInUse"
        return None


@dataclass(slots=True)
class Judgement:
    """Per device (slice index, device index): allocatable on some node for every list
    order ("yes"), for some orders only ("maybe"), or not, with the reason."""

    verdicts: dict[tuple[int, int], tuple[str, str | None]]
    # Per view that can hand out devices: the devices it would hand out and the counters
    # it has left, for the partition figures.
    free_by_view: list[tuple[set[tuple[int, int]], Mapping[CounterKey, Quantity]]]
    # Slices that reach some node but are older than what that node's view uses.
    stale: set[int]

    def verdict(self, at: tuple[int, int]) -> tuple[str, str | None]:
        found = self.verdicts.get(at)
        if found is not None:
            return found
        return ("no", "StaleGeneration" if at[0] in self.stale else "Unreachable")


def judge(
    views: Iterable[View],
    devices: Callable[[int, int], Device],
    state: AllocatedState,
    tainted: Callable[[int, int], bool],
    composite_blocked: Callable[[Device], bool],
) -> Judgement:
    best: dict[tuple[int, int], tuple[str, str | None]] = {}
    free_by_view: list[tuple[set[tuple[int, int]], Mapping[CounterKey, Quantity]]] = []
    stale: set[int] = set()
    for view in views:
        stale.update(view.stale)
        checks: list[ViewCheck | str] = []
        for o in view.outcomes:
            if o.kind == "ok" and o.parsed is not None:
                left = counters_left(o.parsed, state)
                checks.append(ViewCheck(o.parsed, left, any(q.sign() < 0 for q in left.values())))
            else:
                checks.append(_KIND_REASON[o.kind])
        free: set[tuple[int, int]] = set()
        for at in view.targets:
            dev = devices(*at)
            is_tainted = tainted(*at)
            reasons = [
                c if isinstance(c, str) else c.refusal(dev, state, is_tainted, composite_blocked)
                for c in checks
            ]
            if at in view.unsupported:
                reasons = [r or "UnsupportedNodeSelector" for r in reasons]
            found = [r for r in reasons if r is not None]
            verdict: tuple[str, str | None]
            if not found:
                verdict = ("yes", None)
                free.add(at)
            elif len(found) < len(reasons):
                verdict = ("maybe", "InconsistentSliceCount")
            else:
                verdict = ("no", max(found, key=RANKS.__getitem__))
            best[at] = _better(best.get(at), verdict)
        first_ok = next((c for c in checks if isinstance(c, ViewCheck)), None)
        if free and first_ok is not None:
            free_by_view.append((free, first_ok.left))
    return Judgement(best, free_by_view, stale)


def _better(a: tuple[str, str | None] | None, b: tuple[str, str | None]) -> tuple[str, str | None]:
    if a is None:
        return b
    order = {"yes": 2, "maybe": 1, "no": 0}
    if order[a[0]] != order[b[0]]:
        return a if order[a[0]] > order[b[0]] else b
    if a[0] == "no" and b[1] is not None and a[1] is not None:
        return a if RANKS[a[1]] >= RANKS[b[1]] else b
    return a
