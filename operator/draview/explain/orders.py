"""Every order in which 1.34's and 1.35's allocator may walk a node's pools.

Until 1.36, GatherPools keeps the pools in a Go map and returns them in map order, which
changes with every Allocate call, and a pool's slices in the order the scheduler listed
them (rules.pools_sorted off). The first-fit search then meets devices in that order, so
whether it finds a solution before it meets a CEL runtime error, or (1.34) an invalid
pool, can depend on the order alone.

The order is decided lazily: a `Chooser` answers "which pool next" and "which slice of
this pool next" from a recorded prefix of decisions, and stops the search (`NeedChoice`)
the first time it is asked something the prefix does not say. `every_order` then runs
the search again once per possible answer. Searches end early (a solution, an error), so
only the orders that can make a difference are ever tried.

Only pools and slices holding a device that can affect the search take part: a device
the search skips before its selectors (in use), or whose selectors say no without an
error, changes nothing wherever it stands. Where nothing can make the order matter (no
runtime error, no invalid pool, no counters left reserved by a refused device, no
counters cached under a pool name two drivers share, no node selector that cannot be
written, no capacity re-check), one walk in a fixed order gives the only answer: the
search is exhaustive, and what it accepts depends on the devices taken, not on their
order.

Each node's walk has a pool order of its own (a map per Allocate call). A pool's slices
come in the scheduler's list order, which every node of one attempt shares: a `Listing`
fixes, per pool, the order of the slices placed so far (any slice not placed comes after
them), and each node walks its own slices of the pool in that order. Where a node's walk
needs the place of two slices the listing does not give, it stops (`NeedListing`) and
the attempt is tried again once per slice that can come next, on every node: so the
outcomes of one attempt come from one list order (measured on 1.35: a claim that fits on
worker-0 under one order of a pool's slices and on worker-1 under the other never fits
on both, and the third node aborts whenever neither does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from draview.api.claims import DeviceChoice, ResourceClaim
from draview.api.taints import DeviceClass
from draview.cel import CelCompileError, CelEngine, CelRuntimeError, Matcher
from draview.engine.model import PoolKey
from draview.engine.rules import Rules
from draview.explain.checks import untolerated
from draview.explain.gather import NodePool, SearchDevice


class NeedChoice(Exception):
    """The search reached a point its order prefix does not decide."""

    def __init__(self, options: Sequence[int]) -> None:
        super().__init__(f"{len(options)} ways on")
        self.options = tuple(options)


PoolId = tuple[str, str]  # driver, pool
# Per pool, the names of the slices the scheduler's list holds first, in that order.
Listing = Mapping[PoolId, tuple[str, ...]]


class ListingStop(Exception):
    """A node's walk cannot go on under the attempt's listing. Carries what the search
    had left, so the steps spent before it are charged to the question either way."""

    budget = 0


class NeedListing(ListingStop):
    """A node's walk needs to know which of a pool's slices the list holds next."""

    def __init__(self, pool: PoolId) -> None:
        super().__init__(f"the list order of pool {pool[1]}")
        self.pool = pool


class NoSuchListing(ListingStop):
    """The listing contradicts the count a node's view of a pool trusts (NodePool.firsts):
    no attempt lists the slices so."""


@dataclass(slots=True)
class Relevance:
    """Per pool of the node, the slices holding a device that can affect the search."""

    slices: dict[int, list[int]] = field(default_factory=dict)
    pools: list[int] = field(default_factory=list)
    # Per pool, the slices the walk may meet first: the list's first slice of the pool
    # also decides the count it trusts (NodePool.firsts).
    first: dict[int, frozenset[int]] = field(default_factory=dict)
    # Pools, and slices of a pool, that GatherPools puts after the others: those holding
    # devices with binding conditions (rules.binding_pools_last, binding_slices_last).
    later_pools: set[int] = field(default_factory=set)
    later_slices: set[tuple[int, int]] = field(default_factory=set)
    # Per pool: which pool it is, and the name of each slice (NodePool.names).
    ids: dict[int, PoolId] = field(default_factory=dict)
    names: dict[int, list[str]] = field(default_factory=dict)
    # Something that can make the order matter: a runtime error, an invalid pool (1.34),
    # counters, a node selector the result cannot carry, 1.34's capacity re-check.
    hazard: bool = False


@dataclass(slots=True)
class Chooser:
    """The walk order of one Allocate call: pools, and each pool's slices, decided
    lazily from `prefix` (each entry the pool or slice index picked at one decision)."""

    relevance: Relevance
    prefix: tuple[int, ...] = ()
    # Take the first option at every decision: the one answer of an order-free search.
    fixed: bool = False
    # The attempt's list order of the pools' slices, shared by every node (None: each
    # node's walk picks its own).
    listed: Listing | None = None
    used: int = 0
    pool_order: list[int] = field(default_factory=list)
    slice_order: dict[int, list[int]] = field(default_factory=dict)

    def _choose(self, options: list[int]) -> int:
        if len(options) == 1 or self.fixed:
            return options[0]
        if self.used < len(self.prefix):
            picked = self.prefix[self.used]
            self.used += 1
            return picked
        raise NeedChoice(options)

    def pools(self) -> Iterator[int]:
        """The relevant pools, in this call's order (the same for every walk of it)."""
        i = 0
        while True:
            if i == len(self.pool_order):
                rest = [p for p in self.relevance.pools if p not in self.pool_order]
                later = self.relevance.later_pools
                rest = [p for p in rest if p not in later] or rest
                if not rest:
                    return
                self.pool_order.append(self._choose(rest))
            yield self.pool_order[i]
            i += 1

    def slices(self, pool: int) -> Iterator[int]:
        if self.listed is not None and not self.fixed:
            yield from self._listed(pool)
            return
        order = self.slice_order.setdefault(pool, [])
        wanted = self.relevance.slices.get(pool, [])
        i = 0
        while True:
            if i == len(order):
                rest = [s for s in wanted if s not in order]
                later = self.relevance.later_slices
                rest = [s for s in rest if (pool, s) not in later] or rest
                if not order and pool in self.relevance.first:
                    leading = self.relevance.first[pool]
                    rest = [s for s in rest if s in leading] or rest
                if not rest:
                    return
                order.append(self._choose(rest))
            yield order[i]
            i += 1

    def _listed(self, pool: int) -> Iterator[int]:
        """The pool's slices this node walks, in the listing's order; NeedListing when it
        does not say which of two or more comes first."""
        assert self.listed is not None
        rel = self.relevance
        wanted, names = rel.slices.get(pool, []), rel.names[pool]
        placed = self.listed.get(rel.ids[pool], ())
        rank = {name: i for i, name in enumerate(placed)}
        known = sorted((s for s in wanted if names[s] in rank), key=lambda s: rank[names[s]])
        rest = [s for s in wanted if names[s] not in rank]
        if len(rest) > 1:
            raise NeedListing(rel.ids[pool])
        order = known + rest  # a slice not placed comes after those placed
        later = rel.later_slices
        order = [s for s in order if (pool, s) not in later] + [
            s for s in order if (pool, s) in later
        ]
        leading = rel.first.get(pool)
        if leading is not None and order and order[0] not in leading:
            raise NoSuchListing
        yield from order


class _Search(Protocol):
    budget: int

    def run(self) -> str: ...


def every_order(
    make: Callable[[Chooser, int], _Search],
    relevance: Relevance,
    budget: int,
    aborts: tuple[type[Exception], ...],
    listed: Listing | None = None,
) -> tuple[dict[str, str], int]:
    """The outcomes ("ok", "no", "invalid", "error") of one node's Allocate call over
    every order, each with the first message seen, and the budget left. `make` builds the
    search for a chooser and a budget; exceptions of `aborts` are its "error" outcome.
    `listed`: the attempt's list order of slices (every pool order is still tried).
    Raises what the search raises when it runs out of budget, and NeedListing or
    NoSuchListing (see Chooser._listed)."""
    outcomes: dict[str, str] = {}
    pending: list[tuple[int, ...]] = [()]
    while pending:
        prefix = pending.pop()
        chooser = Chooser(relevance, prefix, fixed=not relevance.hazard, listed=listed)
        search = make(chooser, budget)
        try:
            outcome, detail = search.run(), ""
        except NeedChoice as need:
            pending.extend((*prefix, o) for o in reversed(need.options))
            outcome = ""
        except ListingStop as stop:
            # The attempt is asked again with more listed, or not at all.
            stop.budget = search.budget
            raise
        except aborts as exc:
            outcome, detail = "error", str(exc)
        budget = search.budget
        if outcome:
            outcomes.setdefault(outcome, detail)
    return outcomes, budget


@dataclass(frozen=True, slots=True)
class _Key:
    choice: DeviceChoice
    selectors: tuple[str, ...]

    @property
    def skips_in_use(self) -> bool:
        # allocationMode All evaluates every device, in use or not; admin access too.
        return not (self.choice.admin_access or self.choice.allocation_mode == "All")


def _keys(
    claim: ResourceClaim, classes: Mapping[str, DeviceClass], cel: CelEngine
) -> list[tuple[_Key, Matcher]]:
    keys = []
    for req in claim.requests:
        for ch in req.choices if req.prioritized else req.choices[:1]:
            cls = classes.get(ch.device_class_name)
            if cls is None:
                continue  # the claim fails before any device is looked at
            selectors = (*cls.selectors, *ch.selectors)
            keys.append((_Key(ch, selectors), cel.matcher(selectors)))
    return keys


def _effect(d: SearchDevice, in_use: bool, keys: Sequence[tuple[_Key, Matcher]]) -> str:
    """What the device is to the search: "error" when evaluating it for some request
    fails, "refusable" when a request can take it but may refuse it after reserving its
    counters (a taint it does not tolerate), "match" when a request can take it, ""
    when the walk passes it by."""
    found = ""
    for key, match in keys:
        if in_use and key.skips_in_use:
            continue  # skipped before its selectors
        try:
            result = match(d.driver, d.device, d.cel_key)
        except CelCompileError:
            return "error"
        if isinstance(result, CelRuntimeError):
            return "error"
        if result and d.reaches:
            found = found or "match"
            if untolerated(d.taints, key.choice.tolerations):
                found = "refusable"
    return found


def _leaks(d: SearchDevice, effect: str, claim: ResourceClaim, rules: Rules) -> bool:
    """Whether taking the device can leave counters reserved for the rest of the call
    (rules.refusals_release_counters off): refused after the counter check for a taint, a
    constraint or 1.34's capacity re-check, or a share given back."""
    if not d.device.consumes_counters or rules.refusals_release_counters:
        return False
    return (
        effect == "refusable"
        or bool(claim.constraints)
        or d.device.allow_multiple_allocations
        or not rules.capacity_recheck_own_device
    )


def relevance(
    claim: ResourceClaim,
    classes: Mapping[str, DeviceClass],
    pools: Sequence[NodePool],
    cel: CelEngine,
    rules: Rules,
) -> Relevance:
    """Which pools and slices of the node can affect the claim's search, and whether
    their order can change its outcome."""
    keys = _keys(claim, classes, cel)
    out = Relevance(hazard=not rules.capacity_recheck_own_device)
    counted: dict[str, set[str]] = {}  # pool name -> drivers whose devices take counters
    for pi, pool in enumerate(pools):
        out.ids[pi] = (pool.driver, pool.pool)
        out.names[pi] = pool.names
        if pool.invalid and not rules.invalid_pool_is_node_local:
            out.pools.append(pi)  # met by the walk: the attempt aborts
            out.hazard = True
            if rules.binding_pools_last and pool.binding:
                out.later_pools.add(pi)
            continue
        for sj, devices in enumerate(pool.slices):
            hit = False
            for d in devices:
                effect = _effect(d, d.device.name in pool.allocated.dedicated, keys)
                if not effect:
                    continue
                hit = True
                if d.device.consumes_counters:
                    counted.setdefault(pool.pool, set()).add(pool.driver)
                if effect == "error" or d.unsupported_selector or _leaks(d, effect, claim, rules):
                    out.hazard = True
            if hit:
                out.slices.setdefault(pi, []).append(sj)
                if rules.binding_slices_last and any(d.device.binding_conditions for d in devices):
                    out.later_slices.add((pi, sj))
        if pi in out.slices:
            out.pools.append(pi)
            if rules.binding_pools_last and pool.binding:
                out.later_pools.add(pi)
            if pool.firsts is not None and pool.firsts <= set(out.slices[pi]):
                # The list's first slice of the pool holds something the walk meets.
                out.first[pi] = pool.firsts
    if not rules.counters_by_pool_id and any(len(d) > 1 for d in counted.values()):
        # Counters cached by pool name: whichever driver's pool comes first fills it.
        out.hazard = True
    if any(r.choices and r.choices[0].allocation_mode == "All" for r in claim.requests):
        # "All" takes its devices in the walk's order, and a constraint may refuse one.
        out.hazard = out.hazard or bool(claim.constraints)
    return out


def pools_met(
    claim: ResourceClaim,
    classes: Mapping[str, DeviceClass],
    pools: Sequence[NodePool],
    cel: CelEngine,
    rules: Rules,
) -> set[PoolKey]:
    """The pools of `relevance`'s slices (a device some request evaluates and matches,
    or fails on), without the rest it works out: each pool is read up to its first
    such device, where relevance reads every device to know the walk's orders."""
    keys = _keys(claim, classes, cel)
    out: set[PoolKey] = set()
    for pool in pools:
        if pool.invalid and not rules.invalid_pool_is_node_local:
            continue  # relevance keeps it for the walk, with no slice of it
        dedicated = pool.allocated.dedicated
        if any(
            _effect(d, d.device.name in dedicated, keys) for devices in pool.slices for d in devices
        ):
            out.add((pool.driver, pool.pool))
    return out
