"""Would the allocator find devices for this claim on this node?

A port of the search in k8s.io/dynamic-resource-allocation/structured (the "incubating"
implementation the kube-scheduler uses with every DRA gate on): Allocate's request
checks (validateDeviceRequest), allocateOne's first-fit walk, allocateDevice,
checkAvailableCounters, CmpRequestOverCapacity and the attribute constraints
(explain/constraints.py), for one claim. Hand-written because no Python library
implements the DRA allocator; the differential tests in tests/fidelity hold it to the
real one. Where the allocator has quirks (CEL errors met only on devices it reaches,
counters cached per pool *name* across drivers, one attribute remembered per request by
distinctAttribute until 1.36) they are mirrored on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from draview.api.claims import DeviceChoice, ResourceClaim
from draview.api.slices import Device
from draview.api.taints import DeviceClass
from draview.cel import CelCompileError, CelEngine, CelRuntimeError, Matcher
from draview.engine.capacity import CapacityError, request_fits, taken
from draview.engine.compat import Intersection, admit, baseline, uses_of
from draview.engine.rules import DEFAULT_RULES, Rules
from draview.engine.validate import CounterKey, ParsedPool
from draview.engine.verdict import AllocatedState, counters_left
from draview.explain.checks import untolerated
from draview.explain.constraints import (
    Attributes,
    ConstraintError,
    DistinctAttribute,
    MatchAttribute,
    list_mode,
    make,
)
from draview.explain.gather import NodePool, SearchDevice
from draview.explain.orders import Chooser
from draview.quantity import Quantity, try_parse_quantity

MAX_RESULTS = 32  # AllocationResultsMaxSize
Location = tuple[int, int, int]  # pool, slice, device
ORIGIN: Location = (0, 0, 0)
END: Location = (1 << 62, 0, 0)  # past every device


# NodeSearch._static: what a device is to a request, whatever is allocated.
_NEVER, _WHOLE, _MEASURE, _UNKNOWN = 0, 1, 2, 3


class SearchError(Exception):
    """An error the scheduler does not treat as "not on this node": it aborts the pod's
    whole scheduling attempt."""


class _MaxSize(Exception):
    """errAllocationResultMaxSizeExceeded: more results than a claim may hold."""


class BudgetExceeded(Exception):
    """The search took more steps than allowed; its answer is unknown."""


@dataclass(frozen=True, slots=True)
class Pick:
    """One device of a solution, as the allocator's result names it: `request` is
    `name` or `request/subrequest`; `share` what a share of a shareable device takes
    (None for a whole device)."""

    device: SearchDevice
    request: str
    admin_access: bool
    share: Mapping[str, Quantity] | None


@dataclass(slots=True)
class _Request:
    name: str
    parent: str | None
    choice: DeviceChoice
    class_selectors: tuple[str, ...]
    num: int = 0
    capacities: dict[str, Quantity] | None = None
    all_devices: list[tuple[SearchDevice, NodePool]] | None = None
    derived: dict[str, str] = field(default_factory=dict)
    # The class's selectors and the request's, each with what says which failed.
    matchers: tuple[tuple[Matcher, str], ...] | None = None
    # What NodeSearch._static keeps its answers for the request under.
    static_key: object = None

    @property
    def base(self) -> str:
        return self.parent or self.name

    @property
    def sub(self) -> str:
        return self.name if self.parent else ""


def _constraints(
    claim: ResourceClaim, cel: CelEngine, rules: Rules
) -> list[MatchAttribute | DistinctAttribute]:
    lookup = Attributes(cel, rules).value
    try:
        return [make(c, rules, lookup) for c in claim.constraints]
    except ConstraintError as exc:
        raise SearchError(str(exc)) from exc


def _quantities(raw: Mapping[str, str]) -> dict[str, Quantity]:
    out = {}
    for name, text in raw.items():
        q = try_parse_quantity(text)
        if q is None:
            raise SearchError(f"capacity request {name}: {text!r} is not a quantity")
        out[name] = q
    return out


def _attempt(undo: Callable[[], None], go: Callable[[], bool]) -> bool:
    """Go on from a device just taken; give it back unless that leads to a solution."""
    try:
        done = go()
    except Exception:
        undo()
        raise
    if not done:
        undo()
    return done


# What is left of a view's counters with the pool's devices in use: counters_left, or a
# caller's memo of it (explain/fit.py asks the same pools again and again).
LeftOf = Callable[[ParsedPool, AllocatedState], Mapping[CounterKey, int]]


class NodeSearch:
    """One Allocate call for one claim on one node."""

    def __init__(
        self,
        claim: ResourceClaim,
        classes: Mapping[str, DeviceClass],
        pools: Sequence[NodePool],
        cel: CelEngine,
        budget: int = 200_000,
        rules: Rules = DEFAULT_RULES,
        chooser: Chooser | None = None,
        max_results: int = MAX_RESULTS,
        claim_of: Mapping[str, int] | None = None,
        start: Location = ORIGIN,
        left_of: LeftOf = counters_left,
    ) -> None:
        """`chooser`: the walk order where the allocator walks pools in map order;
        `max_results`: how many results a claim may hold; `claim_of`: for a Pod's
        claims searched as one (explain/fit.py), which of them each request belongs
        to: the limit holds for each of them, as the allocator counts it; `start`: where the
        first request's first device is looked for (explain/fit.py skips what an earlier,
        less allocated search on the same pools already passed over); `left_of`: what is
        left of a view's counters (counters_left, or a memo of it)."""
        self.claim_of = claim_of or {}
        self.start = start
        # Where the first request's first device was found (`run` answered "ok"), and
        # the furthest device the walk looked at (END once some walk ran to the end):
        # no device past that changes what the call answers (explain/fit_cut.py).
        self.first_at: Location | None = None
        self.reached: Location = ORIGIN if chooser is None else END  # map order: any
        self.max_results = max_results
        self.claim = claim
        self.chooser = chooser
        self.rules = rules
        self.lists = list_mode(rules)
        self.classes = classes
        self.pools = pools
        self.cel = cel
        self.budget = budget
        self.requests: dict[tuple[int, int], _Request] = {}
        # Devices taken by this call, with the claims taking them (allocatingDevices): a
        # device is in use once any claim takes it; admin access refuses it only where
        # its own claim does.
        self.allocating: dict[tuple[str, str, str], list[int]] = {}
        self.shares: dict[tuple[str, str, str], int] = {}
        self.allocating_capacity: dict[tuple[str, str, str], dict[str, Quantity]] = {}
        self.counters = _Counters(self.rules.counters_by_pool_id, left_of)
        # Compatibility groups open per pool and counter set (engine/compat.py).
        self.groups: dict[tuple[str, str], dict[str, Intersection]] = {}
        self.groups_checked = rules.compatibility_groups
        self.results: list[SearchDevice] = []
        self.held: dict[int, int] = {}  # results per claim of the Pod (claim_of)
        self.picks: list[Pick] = []  # `results` as the allocator's result names them
        self.constraints = _constraints(claim, cel, rules)

    # -- Allocate ------------------------------------------------------------------------
    def run(self) -> str:
        """ "ok", "no", or "invalid" (no solution and some pool is invalid: not fatal).
        Raises SearchError for what aborts the attempt, BudgetExceeded when undecided."""
        # The fewest devices each claim can hold, checked request by request against
        # the limit of one claim, as the allocator does before it searches.
        minimum: dict[int, int] = {}
        for ri, req in enumerate(self.claim.requests):
            least = 0
            if req.prioritized:
                nums = [
                    self._validate((ri, si), ch, req.name).num for si, ch in enumerate(req.choices)
                ]
                least = min(nums, default=0)
            elif req.choices:
                least = self._validate((ri, 0), req.choices[0], None).num
            claim = self.claim_of.get(req.name, 0)
            before = minimum.get(claim, 0)
            if least > self.max_results - before:
                raise SearchError(
                    f"request {req.name}: {least} devices, with {before} already counted, are "
                    f"more than a claim holds ({self.max_results})"
                )
            minimum[claim] = before + least
        try:
            done = self._one(0, 0, 0, False, self.start)
        except _MaxSize:
            done = False
        if not done:
            # ErrFailedAllocationOnNode came with 1.35; 1.34 says nothing more.
            node_local = self.rules.invalid_pool_is_node_local
            return "invalid" if node_local and any(p.invalid for p in self.pools) else "no"
        # The node selector of each claim's allocation, from its own results in order:
        # the first device bound to a node decides, a selector of several terms before
        # it cannot be written.
        decided: set[int] = set()
        for p in self.picks:
            claim = self.claim_of.get(p.request.split("/")[0], 0)
            if claim in decided:
                continue
            if p.device.node_local:
                decided.add(claim)
            elif p.device.unsupported_selector:
                raise SearchError("unsupported ResourceSlice.NodeSelector with several terms")
        return "ok"

    def _validate(self, key: tuple[int, int], ch: DeviceChoice, parent: str | None) -> _Request:
        label = f"{parent}/{ch.name}" if parent else self.claim.requests[key[0]].name
        if not ch.device_class_name:
            raise SearchError(f"request {label}: missing device class name")
        cls = self.classes.get(ch.device_class_name)
        if cls is None:
            raise SearchError(f"request {label}: DeviceClass {ch.device_class_name} not found")
        name = ch.name if parent else self.claim.requests[key[0]].name
        data = _Request(name, parent, ch, cls.selectors, derived=ch.derived)
        self.requests[key] = data
        if ch.capacity_requests:
            data.capacities = _quantities(ch.capacity_requests)
        if ch.allocation_mode == "ExactCount":
            data.num = ch.count
        elif ch.allocation_mode == "All":
            self.reached = END  # every device is looked at
            data.all_devices = []
            # Any pool that looks incomplete or invalid fails the request, whatever the
            # order the allocator meets them in.
            for pool in self.pools:
                if pool.incomplete or pool.invalid:
                    state = "being updated" if pool.incomplete else "invalid"
                    raise SearchError(
                        f"request {label} asks for all devices, but resource pool "
                        f"{pool.driver}/{pool.pool} is currently {state}"
                    )
            for _, d, pool in self._candidates(ORIGIN):
                if not self._selectable(data, d):
                    continue
                used = (
                    None
                    if self.rules.all_mode_static_capacity
                    else pool.allocated.capacity.get(d.device.name)
                )
                if self._request_fits(d.device, data.capacities, used, None):
                    data.all_devices.append((d, pool))
            data.num = len(data.all_devices)
        else:
            raise SearchError(f"request {label}: unsupported mode {ch.allocation_mode}")
        return data

    # -- the walk ------------------------------------------------------------------------
    def _one(self, ri: int, si: int, di: int, in_sub: bool, start: Location) -> bool:
        """allocateOne: device `di` of request `ri` (subrequest `si`), trying candidates
        from `start` on in the allocator's order; True once every request is satisfied."""
        self.budget -= 1
        if self.budget < 0:
            raise BudgetExceeded
        if ri >= len(self.claim.requests):
            return True
        data = self.requests[(ri, si)]
        if not in_sub and data.parent is not None:
            return self._first_subrequest(ri)
        if data.all_devices is not None and not data.all_devices:
            return False
        if di >= data.num:
            return self._one(ri + 1, 0, 0, False, ORIGIN)
        if self.held.get(self._claim(data), 0) + data.num - di > self.max_results:
            raise _MaxSize
        if data.all_devices is not None:
            d, pool = data.all_devices[di]
            undo = self._allocate(data, d, pool, must=True, slot=di)
            if undo is None:
                return False
            return _attempt(undo, lambda: self._one(ri, si, di + 1, in_sub, ORIGIN))
        for loc, d, pool in self._takeable(data, start):
            if loc > self.reached:
                self.reached = loc
            undo = self._allocate(data, d, pool, must=False, slot=di)
            if undo is None:
                continue
            if ri == 0 and di == 0:
                self.first_at = loc  # the last one set is the solution's
            nxt: Location = (loc[0], loc[1], loc[2] + 1)

            def go(n: Location = nxt) -> bool:
                return self._one(ri, si, di + 1, in_sub, n)

            if _attempt(undo, go):
                return True
        self.reached = END
        return False

    def _takeable(
        self, data: _Request, start: Location
    ) -> Iterator[tuple[Location, SearchDevice, NodePool]]:
        """The candidates from `start` on that pass the checks before allocateDevice (in
        use, the selectors, capacity), less those allocateDevice would refuse at the
        counters with nothing taken. The devices walked past are most of a search's
        time: what the checks read is looked up once per slice, what no allocation
        changes once per slice and request (`_static`), and a device's place is made
        only for one that passes."""
        counters = self.counters
        admin, claim, allocating = data.choice.admin_access, self._claim(data), self.allocating
        early = not self.groups_checked  # the counters are allocateDevice's first refusal
        selectable, capacity_ok = self._selectable, self._capacity_ok
        measure = bool(data.capacities)
        allocating_capacity = self.allocating_capacity
        for pi, sj, first, devices, pool in self._runs(start):
            dedicated = pool.allocated.dedicated
            used = pool.allocated.capacity
            static = self._static(data, pool, sj, devices)
            left: Counted | None = None
            available: Mapping[CounterKey, int] = {}
            taken: dict[CounterKey, int] = {}
            for dj in range(first, len(devices)):
                known = static[dj] if static is not None else _UNKNOWN
                if known == _NEVER:
                    continue  # whatever is in use: its selectors fail and raise nothing
                d = devices[dj]
                if admin:
                    if claim in allocating.get(d.id, ()):
                        continue
                elif d.device.name in dedicated or (allocating and d.id in allocating):
                    continue
                if known == _WHOLE and not (
                    measure
                    or (used and d.device.name in used)
                    or (allocating_capacity and d.id in allocating_capacity)
                ):
                    pass  # capacity_ok's first answer: nothing to work out
                elif known == _UNKNOWN:
                    if not selectable(data, d) or not capacity_ok(data, d, pool):
                        continue
                elif not capacity_ok(data, d, pool):
                    continue
                dev = d.device
                if early and dev.consumes_counters and not dev.allow_multiple_allocations:
                    if left is None:
                        left = counters.counted(pool)
                        available, taken = left.available, left.consumed
                    if left.overdrawn:
                        continue
                    # Counted.short, inlined: most devices a walk passes stop here.
                    for ckey, n in d.debits:
                        has = available.get(ckey)
                        if has is not None and has < taken.get(ckey, 0) + n:
                            break
                    else:
                        yield (pi, sj, dj), d, pool
                    continue
                yield (pi, sj, dj), d, pool

    def _static(
        self, data: _Request, pool: NodePool, sj: int, devices: Sequence[SearchDevice]
    ) -> bytes | None:
        """Per device of the pool's slice `sj`, what `_selectable` and the first check of
        `_capacity_ok` answer for the request, which no allocation changes: _NEVER
        (binding conditions the profile refuses, a selector false, out of reach),
        _WHOLE (selectable, nothing to work out without capacity in use or asked for),
        _MEASURE (selectable, capacity to work out) or _UNKNOWN (a selector fails with
        an error: checked where the walk meets it, which raises it). Worked out once per
        slice of the pool's view and request selectors, kept with the pool's prepared
        slices (NodePool.checks); None for a pool built without them."""
        if sj >= len(pool.checks):
            return None
        if data.static_key is None:
            data.static_key = (
                data.class_selectors,
                data.choice.selectors,
                self.lists,
                self.rules.binding_conditions,
            )
        store = pool.checks[sj]
        found = cast(bytes | None, store.get(data.static_key))
        if found is None:
            parsed = pool.parsed
            out = bytearray(len(devices))  # _NEVER
            for j, d in enumerate(devices):
                try:
                    if not self._selectable(data, d):
                        continue
                except SearchError:
                    out[j] = _UNKNOWN
                    continue
                whole = parsed is not None and parsed.takes_whole(d.device)
                out[j] = _WHOLE if whole else _MEASURE
            found = store[data.static_key] = bytes(out)
        return found

    def _first_subrequest(self, ri: int) -> bool:
        """firstAvailable: the subrequests in order, the first that can be satisfied wins;
        only when every one exceeds the result limit does the limit error stand."""
        all_exceeded = True
        sub = 0
        while (ri, sub) in self.requests:
            try:
                if self._one(ri, sub, 0, True, ORIGIN):
                    return True
                all_exceeded = False
            except _MaxSize:
                pass
            sub += 1
        if all_exceeded:
            raise _MaxSize
        return False

    def _candidates(self, start: Location) -> Iterator[tuple[Location, SearchDevice, NodePool]]:
        """Devices from `start` on, in the order _runs gives them."""
        for pi, sj, first, devices, pool in self._runs(start):
            for dj in range(first, len(devices)):
                yield (pi, sj, dj), devices[dj], pool

    def _runs(
        self, start: Location
    ) -> Iterator[tuple[int, int, int, list[SearchDevice], NodePool]]:
        """The devices from `start` on, one slice at a time (pool and slice index, the
        first device's index, the slice's devices, the pool): pools in order (invalid
        ones skipped; those that look incomplete hold no devices unless the profile
        hands them out), slices by name, devices in slice order. Where the profile's
        allocator walks pools in map order (rules.pools_sorted off) the chooser gives
        the order, and every device restarts the walk at the first pool
        (rules.search_resumes off)."""
        if self.chooser is not None:
            yield from self._chosen()
            return
        for pi in range(start[0], len(self.pools)):
            pool = self.pools[pi]
            if pool.invalid:
                continue
            first_slice = start[1] if pi == start[0] else 0
            for sj in range(first_slice, len(pool.slices)):
                first_dev = start[2] if (pi, sj) == start[:2] else 0
                yield pi, sj, first_dev, pool.slices[sj], pool

    def _chosen(self) -> Iterator[tuple[int, int, int, list[SearchDevice], NodePool]]:
        assert self.chooser is not None
        for pi in self.chooser.pools():
            pool = self.pools[pi]
            if pool.invalid:
                # 1.34: allocateOne fails as soon as its walk meets an invalid pool.
                raise SearchError(f"pool {pool.pool} is invalid")
            for sj in self.chooser.slices(pi):
                yield pi, sj, 0, pool.slices[sj], pool

    def _capacity_ok(self, data: _Request, d: SearchDevice, pool: NodePool) -> bool:
        """The capacity check before allocateDevice (after in use and the selectors)."""
        used = pool.allocated.capacity.get(d.device.name)
        allocating = self.allocating_capacity.get(d.id)
        if (
            not (data.capacities or used or allocating)
            and pool.parsed is not None
            and pool.parsed.takes_whole(d.device)
        ):
            return True  # most devices, in every search: no capacity to work out
        return bool(self._request_fits(d.device, data.capacities, used, allocating))

    def _request_fits(
        self,
        dev: Device,
        requests: Mapping[str, Quantity] | None,
        used: Mapping[str, Quantity] | None,
        allocating: Mapping[str, Quantity] | None,
    ) -> bool | None:
        try:
            return request_fits(
                dev, requests, used, allocating, self.rules.fractional_capacity_range
            )
        except CapacityError as exc:
            raise SearchError(f"capacity request on {dev.name}: {exc}") from exc

    def _in_use(self, d: SearchDevice, pool: NodePool) -> bool:
        return d.device.name in pool.allocated.dedicated or d.id in self.allocating

    def _selectable(self, data: _Request, d: SearchDevice) -> bool:
        if d.device.binding_conditions and not self.rules.binding_conditions:
            return False  # before any selector runs: no CEL error can come of it
        if data.matchers is None:
            data.matchers = tuple(
                (self.cel.matcher(selectors, self.lists), where)
                for selectors, where in (
                    (data.class_selectors, "class"),
                    (data.choice.selectors, "claim"),
                )
                if selectors
            )
        for match, where in data.matchers:
            try:
                result = match(d.driver, d.device, d.cel_key)
            except CelCompileError as exc:
                raise SearchError(f"{where} selector does not compile: {exc}") from exc
            if isinstance(result, CelRuntimeError):
                raise SearchError(f"{where} selector: CEL runtime error on {d.id}: {result}")
            if not result:
                return False
        return d.reaches

    def _allocate(
        self, data: _Request, d: SearchDevice, pool: NodePool, must: bool, slot: int = 0
    ) -> Callable[[], None] | None:
        """allocateDevice: None when the device cannot be taken, else how to give it back.
        `must`: a device allocationMode All takes (not a candidate the walk checked with
        _fits); `slot`: which device of its request (or subrequest) this one would be."""
        dev = d.device
        multi = dev.allow_multiple_allocations
        admin = data.choice.admin_access
        claim = self._claim(data)
        # A candidate of the walk (not `must`) passed the same checks in _fits.
        if must and not multi and admin and claim in self.allocating.get(d.id, ()):
            return None
        if must and not admin and self._in_use(d, pool):
            return None
        if d.node_operations_refused:
            return None
        skip = multi and self._skips_counters(d, pool, multi)
        restore_groups = self._take_groups(d, pool, skip) if self.groups_checked else _nothing
        if restore_groups is None:
            return None
        reserved = self._take_counters(d, pool, skip)
        if reserved is None:
            restore_groups()
            return None
        undo: list[Callable[[], None]] = [restore_groups]
        # Until 1.35 a refusal after the counter check keeps the counters reserved, and
        # so does giving back a share (rules.refusals_release_counters).
        releases = self.rules.refusals_release_counters

        def refuse() -> None:
            for step in reversed(undo):
                step()
            if reserved and releases:
                self.counters.release(d, pool)

        def rollback() -> None:
            for step in reversed(undo):
                step()
            if reserved and (releases or not multi):
                self.counters.release(d, pool)

        if not self._admits(data, d, must, undo):
            refuse()
            return None
        if not multi:
            self.allocating.setdefault(d.id, []).append(claim)
            undo.append(partial(self._release, d.id, claim))
        if not self._capacity_fits(data, d, pool, slot):
            if self.rules.capacity_recheck_own_device:
                refuse()
            # else 1.34: allocateDevice returns with the device still marked as being
            # allocated, in the constraints and in the counters.
            return None
        share = None
        if multi:
            share = taken(dev, data.capacities, self.rules.fractional_capacity_range)
            self._add_share(d, share, +1)
            undo.append(partial(self._add_share, d, share, -1))
        self._record(d, data, claim, share, undo)
        return rollback

    def _record(
        self,
        d: SearchDevice,
        data: _Request,
        claim: int,
        share: Mapping[str, Quantity] | None,
        undo: list[Callable[[], None]],
    ) -> None:
        """The device among the results (counted for its claim), and how to take it out."""
        label = f"{data.parent}/{data.name}" if data.parent else data.name
        self.results.append(d)
        self.held[claim] = self.held.get(claim, 0) + 1
        self.picks.append(Pick(d, label, data.choice.admin_access, share))
        undo.append(partial(self._drop_last, claim))

    def _admits(
        self, data: _Request, d: SearchDevice, must: bool, undo: list[Callable[[], None]]
    ) -> bool:
        """allocateDevice's taint and constraint checks; each constraint that takes the
        device puts how to give it back on `undo`."""
        if untolerated(d.taints, data.choice.tolerations):
            return False
        for c in self.constraints:
            try:
                added = c.add(data, d)
            except ConstraintError as exc:
                raise SearchError(str(exc)) from exc
            if not added:
                if must:  # the attempt aborts: what was taken no longer matters
                    raise SearchError(f"cannot add device {d.id}: a claim constraint fails")
                return False
            undo.append(partial(c.remove, data))
        return True

    def _capacity_fits(self, data: _Request, d: SearchDevice, pool: NodePool, slot: int) -> bool:
        """allocateDevice's capacity check. 1.34 with consumable capacity makes it against
        the device at index `slot` of the candidate's slice, and indexes past the slice's
        end (rules.capacity_recheck_own_device off): a panic, which aborts."""
        target = d
        if not self.rules.capacity_recheck_own_device:
            mates = next((s for s in pool.slices if any(x is d for x in s)), [d])
            if slot >= len(mates):
                raise SearchError(
                    f"allocateDevice reads device {slot} of a slice of {len(mates)} "
                    "(index out of range)"
                )
            target = mates[slot]
        used = pool.allocated.capacity.get(target.device.name)
        allocating = self.allocating_capacity.get(target.id)
        return self._request_fits(target.device, data.capacities, used, allocating) is True

    def _skips_counters(self, d: SearchDevice, pool: NodePool, multi: bool) -> bool:
        """skipCounterCheck: a share of a device whose counters are already debited (but
        for 1.34: rules.shares_skip_counter_check)."""
        in_use = self.rules.shares_skip_counter_check and (
            d.device.name in pool.allocated.debited or self.shares.get(d.id, 0) > 0
        )
        return multi and in_use

    def _take_groups(
        self, d: SearchDevice, pool: NodePool, skip: bool
    ) -> Callable[[], None] | None:
        """checkAndConsumeCompatibilityGroups: None when the device's groups do not fit
        those of the devices on its counter sets, else how to restore them."""
        uses = pool.parsed.group_uses if pool.parsed is not None else None
        if not (self.rules.compatibility_groups and uses) or skip:
            return _nothing
        if not d.device.consumes_counters:
            return _nothing
        key = (pool.driver, pool.pool)
        before = self.groups.get(key)
        if before is None:
            before = baseline(uses, pool.allocated.used)
        after = admit(before, uses_of(d.device.consumes_counters))
        if after is None:
            return None
        self.groups[key] = after
        return partial(self.groups.__setitem__, key, before)

    def _take_counters(self, d: SearchDevice, pool: NodePool, skip: bool) -> bool | None:
        """allocateDevice's counter step: None when the device cannot be taken, else
        whether its counters were reserved (not when `skip`: _skips_counters)."""
        dev = d.device
        if dev.consumes_counters and pool.parsed is not None and not pool.parsed.partitionable:
            return None  # the profile's allocator has partitionable devices off
        if not dev.consumes_counters or skip:
            return False
        return True if self.counters.reserve(d, pool) else None

    def _claim(self, data: _Request) -> int:
        return self.claim_of.get(data.base, 0)

    def _release(self, dev: tuple[str, str, str], claim: int) -> None:
        claims = self.allocating[dev]
        claims.remove(claim)
        if not claims:
            del self.allocating[dev]

    def _drop_last(self, claim: int) -> None:
        self.picks.pop()
        self.results.pop()  # undone in reverse order of allocation, as backtracking does
        self.held[claim] -= 1

    def _add_share(self, d: SearchDevice, share: Mapping[str, Quantity], sign: int) -> None:
        if sign < 0 and not share and self.rules.empty_shares_stay:
            return  # rules.empty_shares_stay: still capacity in use
        self.shares[d.id] = self.shares.get(d.id, 0) + sign
        into = self.allocating_capacity.setdefault(d.id, {})
        for name, q in share.items():
            into[name] = (into[name] + q if sign > 0 else into[name] - q) if name in into else q
        if not self.shares[d.id]:
            del self.allocating_capacity[d.id]


def _nothing() -> None:
    return None


@dataclass(slots=True)
class Counted:
    """One pool's counters in one attempt, in nanos: what is left of each, what the
    attempt took, and whether some counter was already below zero."""

    available: Mapping[CounterKey, int]
    consumed: dict[CounterKey, int]
    overdrawn: bool

    def short(self, debits: Sequence[tuple[CounterKey, int]]) -> bool:
        """Whether reserve refuses a device with these debits: what is left, less what
        this attempt took, does not cover them. A counter the attempt does not touch
        still fails when already negative; every other passed when it was last reserved
        and has not grown since: only the device's own debits need looking at."""
        if self.overdrawn:
            return True
        available, consumed = self.available, self.consumed
        for key, n in debits:
            left = available.get(key)
            if left is not None and left < consumed.get(key, 0) + n:
                return True
        return False


class _Counters:
    """Counters left and taken by one attempt. Until 1.36.5 the allocator cached both
    maps under the pool's name alone, so two drivers with equally named pools shared
    them within one Allocate call; from 1.36.6 and in 1.37 under (driver, pool)
    (rules.counters_by_pool_id)."""

    def __init__(self, by_pool_id: bool, left_of: LeftOf = counters_left) -> None:
        self.by_pool_id = by_pool_id
        self.left_of = left_of
        self.pools: dict[str, Counted] = {}
        self._keys: dict[int, str] = {}

    def _key(self, pool: NodePool) -> str:
        # 1.34 keys them by slice name, unique in the cluster: its counter sets are named
        # per slice (ParsedPool.per_slice), so per driver and pool is the same thing.
        found = self._keys.get(id(pool))  # the pools live as long as the search
        if found is None:
            per_slice = pool.parsed is not None and pool.parsed.per_slice
            by_id = self.by_pool_id or per_slice
            found = self._keys[id(pool)] = f"{pool.driver}/{pool.pool}" if by_id else pool.pool
        return found

    def counted(self, pool: NodePool) -> Counted:
        """The pool's counters in this attempt (shared with every pool of its key)."""
        name = self._key(pool)
        found = self.pools.get(name)
        if found is None:
            parsed = pool.parsed
            available = self.left_of(parsed, pool.allocated) if parsed else {}
            # Per slice (1.34) only the device's own slice's counters count, all in its
            # debits: no counter fails a device that does not debit it.
            overdrawn = (
                (parsed is None or not parsed.per_slice)
                and bool(available)
                and min(available.values()) < 0
            )
            found = self.pools[name] = Counted(available, {}, overdrawn)
        return found

    def short(self, d: SearchDevice, pool: NodePool) -> bool:
        return self.counted(pool).short(d.debits)

    def reserve(self, d: SearchDevice, pool: NodePool) -> bool:
        # Checked before anything is taken, so a refusal has nothing to give back.
        counted = self.counted(pool)
        if counted.short(d.debits):
            return False
        consumed = counted.consumed
        for key, n in d.debits:
            consumed[key] = consumed.get(key, 0) + n
        return True

    def release(self, d: SearchDevice, pool: NodePool) -> None:
        consumed = self.counted(pool).consumed
        for key, n in d.debits:
            consumed[key] -= n
