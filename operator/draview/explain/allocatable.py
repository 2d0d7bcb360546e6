"""Whether the scheduler's allocator can allocate a claim somewhere: the search of
explain/search.py run on every node, as the scheduler's Filter runs it.

One node's error that is not "not on this node" aborts the whole attempt, so it decides
the answer; otherwise one node with a solution is enough. Where the allocator walks pools
in map order (1.34, 1.35), each node's search is run over every order that can matter
(explain/orders.py), and the attempt's possible outcomes are combined from each node's:
every node's Allocate call walks the pools in an order of its own, and the slices of a
pool in the list order that all nodes of the attempt share (one `Listing` at a time).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice, product

from draview.api.claims import ResourceClaim
from draview.api.taints import DeviceClass, DeviceTaintRule
from draview.cel import CelEngine
from draview.engine.pool import PoolResult
from draview.engine.profile import Profile
from draview.engine.rules import DEFAULT_RULES, Rules, as_read, refusal, rules_for
from draview.explain.gather import Assignment, GatherIndex, NodePool, ambiguous, node_pools
from draview.explain.orders import (
    Chooser,
    Listing,
    ListingStop,
    NeedListing,
    NoSuchListing,
    Relevance,
    every_order,
    relevance,
)
from draview.explain.search import BudgetExceeded, NodeSearch, SearchError
from draview.explain.steps import Steps, finish

MAX_COMBINATIONS = 256  # assignments of trusted counts, combined across pools

# What one scheduling attempt can end in.
FITS, UNSCHEDULABLE, ABORTS = "yes", "unschedulable", "aborts"


@dataclass(frozen=True, slots=True)
class Allocatability:
    # "yes", "no", "maybe" (depends on the order the scheduler lists slices or its
    # allocator walks pools), "unknown" (the search ran out of steps)
    answer: str
    detail: str = ""
    nodes: tuple[str, ...] = ()  # where it fits (where it may, for "maybe")
    # The attempt outcomes that can happen (FITS, UNSCHEDULABLE, ABORTS), each with what
    # it says: more than one when the order decides.
    outcomes: tuple[tuple[str, str], ...] = ()

    @property
    def aborts(self) -> bool:
        """Every attempt ends in an error that aborts it (the verdict Error)."""
        return [o for o, _ in self.outcomes] == [ABORTS]


@dataclass(slots=True)
class _Question:
    """One claim asked on every node: what stays the same across nodes and orders."""

    claim: ResourceClaim
    index: GatherIndex
    classes: Mapping[str, DeviceClass]
    rules: Sequence[DeviceTaintRule]
    cel: CelEngine
    profile_rules: Rules
    budget: int

    def node(
        self,
        pools: list[NodePool],
        relevant: Relevance | None = None,
        listed: Listing | None = None,
    ) -> dict[str, str]:
        """The outcomes of one node's Allocate call ("ok", "no", "invalid", "error"),
        over every pool order the profile's allocator may walk (`relevant`: the pools'
        relevance, when known) with the pools' slices in the order `listed` gives."""
        if self.profile_rules.pools_sorted:
            search = NodeSearch(
                self.claim, self.classes, pools, self.cel, self.budget, self.profile_rules
            )
            try:
                outcome, detail = search.run(), ""
            except SearchError as exc:
                outcome, detail = "error", str(exc)
            self.budget = search.budget
            return {outcome: detail}

        def make(chooser: Chooser, budget: int) -> NodeSearch:
            return NodeSearch(
                self.claim, self.classes, pools, self.cel, budget, self.profile_rules, chooser
            )

        if relevant is None:
            relevant = relevance(self.claim, self.classes, pools, self.cel, self.profile_rules)
        try:
            found, self.budget = every_order(make, relevant, self.budget, (SearchError,), listed)
        except ListingStop as stop:
            self.budget = stop.budget
            raise
        return found


def _once(
    q: _Question, nodes: Sequence[str | None], which: Mapping[tuple[str, str], Assignment]
) -> Steps[tuple[dict[str, str], list[str]]]:
    """The outcomes one attempt can end in, for one assignment of trusted counts, and
    the nodes where it may fit."""
    if q.profile_rules.pools_sorted:
        binding_last = q.profile_rules.binding_pools_last
        walks = (
            _Walk(node, node_pools(node, q.index, q.rules, which, binding_last)) for node in nodes
        )
        return (yield from _combined(q, walks))
    return (yield from _every_listing(q, nodes, which))


def _every_listing(
    q: _Question, nodes: Sequence[str | None], which: Mapping[tuple[str, str], Assignment]
) -> Steps[tuple[dict[str, str], list[str]]]:
    """_once where pools are walked in map order: the outcomes of every list order of
    the pools' slices that can matter, each shared by all the nodes of its attempt."""
    walks: list[_Walk] = []
    # Per pool, every slice some node's walk can meet where the order can matter: what
    # the list may hold next.
    listable: dict[tuple[str, str], set[str]] = {}
    for node in nodes:
        yield
        pools = node_pools(node, q.index, q.rules, which, q.profile_rules.binding_pools_last)
        rel = relevance(q.claim, q.classes, pools, q.cel, q.profile_rules)
        if not rel.hazard:
            # No order changes what this node answers: asked once, its pools not kept
            # (a cluster of thousands of nodes would hold them all otherwise).
            walks.append(_Walk(node, [], found=q.node(pools, rel)))
            continue
        walks.append(_Walk(node, pools, rel))
        for pi, sjs in rel.slices.items():
            listable.setdefault(rel.ids[pi], set()).update(rel.names[pi][sj] for sj in sjs)
    outcomes: dict[str, str] = {}
    fits: dict[str, None] = {}
    pending: list[Listing] = [{}]
    while pending:
        listed = pending.pop()
        try:
            found, where = yield from _combined(q, walks, listed)
        except NeedListing as need:
            placed = listed.get(need.pool, ())
            options = sorted(listable.get(need.pool, set()) - set(placed))
            pending.extend({**listed, need.pool: (*placed, o)} for o in reversed(options))
            continue
        except NoSuchListing:
            continue
        fits.update(dict.fromkeys(where))
        for outcome, detail in found.items():
            outcomes.setdefault(outcome, detail)
    if not outcomes:  # no listing agreed with the counts trusted: each node on its own
        return (yield from _combined(q, walks))
    return outcomes, list(fits)


@dataclass(frozen=True, slots=True)
class _Walk:
    """What one node's Allocate call walks: its pools, and which of them matter."""

    node: str | None
    pools: list[NodePool]
    relevant: Relevance | None = None
    found: dict[str, str] | None = None  # its answer, where no order changes it


def _combined(
    q: _Question, walks: Iterable[_Walk], listed: Listing | None = None
) -> Steps[tuple[dict[str, str], list[str]]]:
    """The outcomes of one attempt from each node's Allocate call."""
    fits: list[str] = []
    error = ""
    stuck = True  # every node can end without a solution and without an error
    for walk in walks:
        yield  # one node's search between two steps
        node = walk.node
        # One budget for the whole question: a search that explodes on one node must not
        # be allowed to do so on every other node too.
        found = walk.found if walk.found is not None else q.node(walk.pools, walk.relevant, listed)
        if "error" in found:
            if len(found) == 1:  # whatever the other nodes do
                return {ABORTS: f"the scheduler aborts: {found['error']}"}, []
            error = error or f"the scheduler aborts: {found['error']}"
        if "ok" in found:
            fits.append(node or "any node")
        stuck = stuck and bool({"no", "invalid"} & found.keys())
    out: dict[str, str] = {}
    if fits:
        out[FITS] = "it fits on " + ", ".join(fits[:3]) + (" and more" if len(fits) > 3 else "")
    if stuck:
        out[UNSCHEDULABLE] = "no node has devices that satisfy every request"
    if error:
        out[ABORTS] = error
    return out, fits


def judged_with(results: Iterable[PoolResult]) -> Rules:
    """The rules the engine judged the pools with (the profile's); the default rules
    when no pool was judged."""
    for r in results:
        if r.prepared is not None:
            return r.prepared.rules
    return DEFAULT_RULES


def allocatable(
    claim: ResourceClaim,
    results: Sequence[PoolResult],
    classes: Mapping[str, DeviceClass],
    rules: Sequence[DeviceTaintRule] = (),
    nodes: Sequence[str | None] | None = None,
    cel: CelEngine | None = None,
    budget: int = 500_000,
    profile: Profile | None = None,
) -> Allocatability:
    """`nodes`: the nodes to try (default: every node some pool's view names); `profile`:
    whose scheduler to mirror (default: the one the results were judged with)."""
    return finish(allocatable_steps(claim, results, classes, rules, nodes, cel, budget, profile))


def allocatable_steps(
    claim: ResourceClaim,
    results: Iterable[PoolResult],
    classes: Mapping[str, DeviceClass],
    rules: Sequence[DeviceTaintRule] = (),
    nodes: Sequence[str | None] | None = None,
    cel: CelEngine | None = None,
    budget: int = 500_000,
    profile: Profile | None = None,
    gather: GatherIndex | None = None,
    shaky: Mapping[tuple[str, str], list[Assignment]] | None = None,
) -> Steps[Allocatability]:
    """allocatable() in steps, one node's search each; `gather` and `shaky`: what is
    otherwise built from `results` (GatherIndex.build, ambiguous) on every call."""
    profile_rules = rules_for(profile) if profile is not None else judged_with(results)
    refused = refusal(claim, profile_rules)
    if refused is not None:
        return _verdict({ABORTS: f"the scheduler aborts: {refused}"})
    if not profile_rules.taint_rules:
        rules = ()
    if gather is None or shaky is None:
        listed = list(results)
        gather, shaky = GatherIndex.build(listed), ambiguous(listed)
    q = _Question(
        as_read(claim, profile_rules),
        gather,
        classes,
        rules,
        cel or CelEngine(),
        profile_rules,
        budget,
    )
    tried = list(nodes) if nodes is not None else gather.nodes()
    # Where slices disagree on resourceSliceCount the scheduler's list order picks the
    # count; every combination is tried (two counts per pool, so a handful at most).
    pools = dict(shaky)
    outcomes: dict[str, str] = {}
    fits: dict[str, None] = {}
    shuffled = False  # some attempt's outcome depends on the pool order alone
    try:
        # Pools are gathered apart, so any assignment of one combines with any of another.
        for combo in islice(product(*pools.values()), MAX_COMBINATIONS):
            found, where = yield from _once(q, tried, dict(zip(pools, combo, strict=True)))
            shuffled = shuffled or len(found) > 1
            fits.update(dict.fromkeys(where))
            for outcome, detail in found.items():
                outcomes.setdefault(outcome, detail)
    except BudgetExceeded:
        # Even with a fit somewhere, a node not searched could abort the attempt.
        return Allocatability("unknown", "the search for a solution was cut short")
    return _verdict(outcomes, tuple(fits), shuffled)


def _verdict(
    outcomes: Mapping[str, str], nodes: tuple[str, ...] = (), shuffled: bool = False
) -> Allocatability:
    ranked = tuple((o, outcomes[o]) for o in (FITS, UNSCHEDULABLE, ABORTS) if o in outcomes)
    if len(ranked) == 1:
        outcome, detail = ranked[0]
        if outcome == FITS:
            return Allocatability("yes", nodes=nodes, outcomes=ranked)
        return Allocatability("no", detail, outcomes=ranked)
    why = (
        "the allocator walks pools in an order of its own on every attempt"
        if shuffled
        else "slices of a pool disagree on resourceSliceCount: the answer depends on "
        "which one the scheduler lists first"
    )
    detail = f"{why}: " + "; or ".join(d for _, d in ranked)
    return Allocatability("maybe" if FITS in outcomes else "no", detail, nodes, ranked)
