"""The question `fit` asks (explain/fit.py): a workload's copies searched node by node
with the port of the allocator's search (explain/search.py), the pools each node
gathers and what the copies took from them, and what placements on a group of nodes can
reach. The module docstring of explain/fit.py says how the answer is read from it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice, product
from operator import attrgetter

from draview.api.claims import Constraint, Request, ResourceClaim
from draview.api.taints import DeviceClass
from draview.api.world import World
from draview.cel import CelEngine
from draview.engine.components import components
from draview.engine.model import AllocRef, PoolKey
from draview.engine.pool import PoolResult
from draview.engine.rules import Rules
from draview.engine.validate import CounterKey, ParsedPool
from draview.engine.verdict import AllocatedState, counters_left
from draview.explain.allocatable import MAX_COMBINATIONS
from draview.explain.fit_cut import PoolChange, cut, touches
from draview.explain.gather import (
    Assignment,
    GatherIndex,
    NodePool,
    ambiguous,
    ambiguous_pool,
    node_pools,
)
from draview.explain.orders import Chooser, NeedChoice, pools_met, relevance
from draview.explain.places import changed_places
from draview.explain.search import (
    END,
    MAX_RESULTS,
    ORIGIN,
    BudgetExceeded,
    Location,
    NodeSearch,
    Pick,
    SearchError,
)

# Steps one node search may take (explain/search.py), as `why` allows.
SEARCH_STEPS = 200_000

NodeName = str | None

# Whether a SearchDevice is shareable, read in C over every device of a node (resumes_on).
_SHAREABLE = attrgetter("device.allow_multiple_allocations")


@dataclass(frozen=True, slots=True, order=True)
class Taken:
    """One device result of one copy: what the state after the copy holds."""

    driver: str
    pool: str
    device: str
    request: str  # as the allocator names it in the merged claim (see Merged)
    admin_access: bool = False
    shared: bool = False  # a share of a shareable device
    consumed: tuple[tuple[str, str], ...] = ()  # consumedCapacity of a share


# The devices taken by the copies placed so far, sorted: copies are interchangeable,
# so two placements that took the same devices are the same state.
State = tuple[int, tuple[Taken, ...]]  # (copies, taken)
START: State = (0, ())

Path = list[tuple[NodeName, tuple[Taken, ...]]]


# -- the claims of one copy, searched as one ----------------------------------------------


@dataclass(frozen=True, slots=True)
class Merged:
    """A Pod's claims as one claim for one Allocate call: request names prefixed with
    their claim's index when there are several (`c0-gpu`), constraints with their
    requests named, so each still applies to its own claim's requests."""

    claim: ResourceClaim
    names: tuple[str, ...]  # each merged claim's name
    several: bool
    claim_of: Mapping[str, int]  # merged request name -> index of its claim

    def owner(self, request: str) -> tuple[str, str]:
        """(claim name, request as that claim names it) of a merged request name."""
        if not self.several:
            return self.names[0], request
        head, _, rest = request.partition("-")
        return self.names[int(head[1:])], rest


# A workload's claims for each copy, the shared ones the first copy allocates, and
# each merged for one Allocate call: the copies' own, and the first copy's.
ReadClaims = tuple[tuple[ResourceClaim, ...], tuple[ResourceClaim, ...], Merged, Merged]


def merge_claims(claims: Sequence[ResourceClaim]) -> Merged:
    names = tuple(c.name for c in claims)
    if len(claims) == 1:
        return Merged(claims[0], names, False, {})
    requests: list[Request] = []
    constraints: list[Constraint] = []
    for ci, c in enumerate(claims):

        def renamed(name: str, ci: int = ci) -> str:
            return f"c{ci}-{name}"

        requests.extend(r.model_copy(update={"name": renamed(r.name)}) for r in c.requests)
        own = tuple(renamed(r.name) for r in c.requests)
        for k in c.constraints:
            named = tuple(renamed(n) for n in k.requests) if k.requests else own
            constraints.append(k.model_copy(update={"requests": named}))
    merged = ResourceClaim(
        uid="fit-pod",
        namespace=claims[0].namespace,
        name=claims[0].name,
        requests=tuple(requests),
        constraints=tuple(constraints),
    )
    of = {r.name: int(r.name.split("-", 1)[0][1:]) for r in requests}
    return Merged(merged, names, True, of)


# -- one node's searches ------------------------------------------------------------------

# One outcome of one node's Allocate call: ("ok", devices) | ("no", ()) | ("error", msg)
# | ("unknown", ()) when its search ran out of steps.
Outcome = tuple[str, tuple[Taken, ...] | str]
# A node's outcomes are kept by (combination, the copies' devices it can meet, copies).
OutcomeKey = tuple[int, tuple[Taken, ...], int]


def taken_of(picks: Sequence[Pick]) -> tuple[Taken, ...]:
    out = []
    for p in picks:
        d = p.device
        consumed = tuple(sorted((k, str(q)) for k, q in (p.share or {}).items()))
        out.append(
            Taken(
                d.driver,
                d.pool,
                d.device.name,
                p.request,
                p.admin_access,
                p.share is not None,
                consumed,
            )
        )
    return tuple(sorted(out))


class Question:
    """One workload asked of one world: the pools each node gathers, what the copies took."""

    def __init__(
        self,
        world: World,
        results: Sequence[PoolResult],
        base: Mapping[PoolKey, Sequence[AllocRef]],
        rules: Rules,
        merged: Merged,
        first: Merged,
        budget: int,
        cel: CelEngine,
    ) -> None:
        self.results = results
        self.rules = rules
        self.merged, self.first = merged, first
        self.classes: dict[str, DeviceClass] = {c.name: c for c in world.classes}
        self.taint_rules = tuple(world.taint_rules) if rules.taint_rules else ()
        self.cel = cel
        self.budget = budget
        self.searches = 0
        self.index = GatherIndex.build(results)
        self.by_key = {r.key: r for r in results}
        self._seen = list(results)  # a copy: the caller's list may change
        self._place = {r.key: i for i, r in enumerate(results)}  # in _seen
        shaky = ambiguous(results)
        self.shaky = set(shaky)
        # Where slices disagree on resourceSliceCount, every count the list may make
        # the allocator trust (as `why` tries them).
        self.combos: list[dict[PoolKey, Assignment]] = [
            dict(zip(shaky, c, strict=True))
            for c in islice(product(*shaky.values()), MAX_COMBINATIONS)
        ]
        self.base = base  # the world's allocations by pool (index_allocations)
        # Kept per node and per pool, so that a question asked again (FitMemo) forgets
        # only what a pool judged again changes.
        self._pools: dict[NodeName, dict[int, list[NodePool]]] = {}
        self._resumes: dict[NodeName, bool] = {}  # resumes_on, per node
        self._states: dict[PoolKey, dict[tuple[Taken, ...], AllocatedState]] = {}
        # left_of's memo, and the engine's state each of _states adds devices to.
        self._lefts: dict[tuple[int, int], Mapping[CounterKey, int]] = {}
        self._derived: dict[int, tuple[AllocatedState, set[str]]] = {}
        # Per engine state of a pool the nodes gather: the state, and what the engine
        # found left of its views' counters (PoolResult.lefts).
        self._given: dict[int, tuple[AllocatedState, Mapping[int, Mapping[CounterKey, int]]]] = {}
        self._outcomes: dict[NodeName, dict[OutcomeKey, list[Outcome]]] = {}
        # How far the walk of each of those went, where one search gave it (the pools
        # walked in order); and per node the outcomes of earlier askings that still
        # hold (renew keeps those that ended before the changes: fit_cut.py), each
        # counted as a search again when first read, as a new question searches it.
        self._reached: dict[NodeName, dict[OutcomeKey, Location]] = {}
        self._kept: dict[NodeName, dict[OutcomeKey, tuple[list[Outcome], Location]]] = {}
        self.max_results = MAX_RESULTS  # each claim of the Pod (search.NodeSearch)
        self.tried: Sequence[NodeName] = ()  # the nodes copies may go to
        self._relevant: dict[NodeName, set[PoolKey]] = {}
        self.relevant_before: dict[NodeName, set[PoolKey] | None] = {}
        # The requests of the shared claims the first copy allocates: later copies go
        # only where their devices reach.
        own = set(merged.names)
        self.shared_requests = (
            {r.name for r in first.claim.requests if first.owner(r.name)[0] not in own}
            if first is not merged
            else set()
        )
        # Where the search from each state may begin (outcomes, `resumable`).
        self._starts: dict[NodeName, dict[tuple[int, tuple[Taken, ...]], Location]] = {}
        self.resumable = resumable(merged, first, rules)
        # The pools judged again (or gone, or new) at the last renewal.
        self.changed: set[PoolKey] = set()

    def renew(
        self,
        results: Sequence[PoolResult],
        base: Mapping[PoolKey, Sequence[AllocRef]],
        hint: Collection[PoolKey] | None = None,
    ) -> set[NodeName] | None:
        """Take the pools as judged now, for the same question asked again (FitMemo):
        the nodes that gather a pool judged again (or gone, or new), whose cached pools
        and searches are forgotten. None when the question must start over: a pool that
        every node gathers, or whose slices disagree on resourceSliceCount, changed.
        `hint`: the only pools whose results may be other objects, in the same places
        (a capacity probe knows them)."""
        before: dict[PoolKey, PoolResult] = {}  # what the changed pools were
        found = self._hinted(results, hint, before) if hint is not None else None
        hinted = found is not None
        if found is None:
            found = _changed(self._seen, results, self.by_key, before)
        changed, now = found
        put = self._put_again(changed, now, before)
        if put is None:
            return None
        affected, changes, whole = put
        self.results, self.base, self.by_key = results, base, now
        if not hinted:
            self._seen = list(results)
            self._place = {r.key: i for i, r in enumerate(results)}
        self.changed = changed
        self.searches = 0
        # What the affected nodes' relevant pools were: groups stay as they were when
        # these come out the same (FitMemo.groups_of).
        self.relevant_before = {n: self._relevant.get(n) for n in affected}
        for node in affected:
            self._pools.pop(node, None)
            self._resumes.pop(node, None)
            self._relevant.pop(node, None)
        self.forget_searches(affected)
        for key in changed:
            for state in self._states.pop(key, {}).values():
                self._derived.pop(id(state), None)
        # Keyed by the ids of views and states: those of a pool judged again may be
        # reused by new objects.
        self._lefts.clear()
        self._given.clear()
        self._cut_searches(affected, changes, whole)
        return affected

    def _put_again(
        self,
        changed: set[PoolKey],
        now: Mapping[PoolKey, PoolResult],
        before: Mapping[PoolKey, PoolResult],
    ) -> tuple[set[NodeName], dict[PoolKey, PoolChange], set[NodeName]] | None:
        """The changed pools put in the gather index as judged now: the nodes that gather
        them, before or now; the changes of those whose slices stayed; and the nodes that
        gather one whose did not. None when the question must start over."""
        affected: set[NodeName] = set()
        changes: dict[PoolKey, PoolChange] = {}
        whole: set[NodeName] = set()
        for key in changed:
            if key in self.shaky or key in self.index.bystanders:
                return None
            nodes = self.index.nodes_of(key)
            affected.update(nodes)
            r, old = now.get(key), before.get(key)
            if r is not None and old is not None and old.prepared is r.prepared:
                changes[key] = PoolChange.of(old, r)
            else:
                whole.update(nodes)
            if r is None:
                self.index.drop(key)
                continue
            if ambiguous_pool(r) is not None:
                return None
            self.index.put(r)
            if key in self.index.bystanders:
                return None
            if key not in changes:
                whole.update(self.index.nodes_of(key))
            affected.update(self.index.nodes_of(key))
        return affected, changes, whole

    def _cut_searches(
        self, affected: set[NodeName], changes: Mapping[PoolKey, PoolChange], whole: set[NodeName]
    ) -> None:
        """Of the affected nodes' searches from earlier askings, keep those the changes
        leave standing (fit_cut.py): that end before the first device a change that
        frees some moves, and, of a change that only takes, took none it moves; and
        the places searches begin at up to that first device. All go on the nodes
        `whole` names (a pool came, went or has other slices there), and where the
        walk follows map order."""
        freeing = {k: c for k, c in changes.items() if not c.takes_only}
        taking = {k: c for k, c in changes.items() if c.takes_only}
        for node in affected:
            kept, starts = self._kept.get(node), self._starts.get(node)
            if not (kept or starts):
                continue
            if node in whole or not self.rules.pools_sorted:
                self._kept.pop(node, None)
                self._starts.pop(node, None)
                continue
            views = self.index.by_node.get(node, {})
            cuts: dict[int, Location] = {}
            for combo in {k[0] for k in kept or ()} | {k[0] for k in starts or ()}:
                cuts[combo] = cut(self.pools(node, combo), freeing, views) if freeing else END
            if kept:
                self._kept[node] = {
                    k: v
                    for k, v in kept.items()
                    if (cuts[k[0]] == END or v[1] < cuts[k[0]])
                    and not (taking and _takes_moved(v[0], taking))
                }
            if starts:
                self._starts[node] = {k: at for k, at in starts.items() if at <= cuts[k[0]]}

    def _hinted(
        self,
        results: Sequence[PoolResult],
        hint: Collection[PoolKey],
        was: dict[PoolKey, PoolResult],
    ) -> tuple[set[PoolKey], dict[PoolKey, PoolResult]] | None:
        """_changed from the hint: the hinted pools whose results are other objects,
        `_seen` and `by_key` patched in their places; None when the results are not in
        the places `_seen` has them (compared in full then)."""
        seen, by_key = self._seen, self.by_key
        if len(results) != len(seen):
            return None
        moved: list[tuple[int, PoolResult]] = []
        for key in hint:
            i = self._place.get(key)
            if i is None or results[i].key != key:
                return None
            if results[i] is not seen[i]:
                moved.append((i, results[i]))
        for i, r in moved:
            was[r.key] = seen[i]
            seen[i] = by_key[r.key] = r
        return {r.key for _, r in moved}, by_key

    def shed(self) -> None:
        """Between askings (FitMemo): drop the nodes' pools and the states the copies made;
        keep the searches that one search answered (and how far its walk went) for the
        next asking, which keeps those that end before what changed (`renew`)."""
        for kept in (
            self._pools,
            self._resumes,
            self._states,
            self._derived,
            self._lefts,
            self._given,
        ):
            kept.clear()
        self.forget_searches(list(self._outcomes))

    def forget_searches(self, nodes: Iterable[NodeName]) -> None:
        """Forget the nodes' outcomes as found in this asking: read again, each costs what
        a new question's search costs (the budget counts them alike), though those one
        search answered are kept and not searched again."""
        for node in nodes:
            found = self._outcomes.pop(node, None)
            reached = self._reached.pop(node, None)
            if not found or not reached:
                continue
            kept = self._kept.get(node)
            if kept is None:
                kept = self._kept[node] = {}
            for key, at in reached.items():
                kept[key] = (found[key], at)

    def nodes(self) -> tuple[NodeName, ...]:
        return self.index.nodes()

    def pools(self, node: NodeName, combo: int) -> list[NodePool]:
        mine = self._pools.get(node)
        if mine is None:
            mine = self._pools[node] = {}
        found = mine.get(combo)
        if found is None:
            found = mine[combo] = node_pools(
                node,
                self.index,
                self.taint_rules,
                self.combos[combo],
                self.rules.binding_pools_last,
            )
            for p in found:
                r = self.by_key.get((p.driver, p.pool))
                if r is not None and r.lefts and p.allocated is r.allocated:
                    self._given[id(p.allocated)] = (p.allocated, r.lefts)
        return found

    def _allocated(self, pool: NodePool, taken: tuple[Taken, ...]) -> AllocatedState:
        key = (pool.driver, pool.pool)
        states = self._states.get(key)
        if states is None:
            states = self._states[key] = {}
        found = states.get(taken)
        if found is None:
            # The pool's state is that of the world's allocations (gather.py).
            refs = [
                AllocRef(
                    t.device,
                    "fit",
                    "copy",
                    "fit",
                    t.request,
                    t.admin_access,
                    f"fit-share-{i}" if t.shared else None,
                    t.consumed,
                )
                for i, t in enumerate(taken)
            ]
            found = states[taken] = pool.allocated.plus(refs, self.rules)
            self._derived[id(found)] = (pool.allocated, {t.device for t in taken})
        return found

    def left_of(self, parsed: ParsedPool, state: AllocatedState) -> Mapping[CounterKey, int]:
        """counters_left, once per view and state. A state the copies made (`_allocated`)
        is the engine's state of the pool and a few devices more: its counters are that
        state's less the debits of the devices it charges that the engine's did not."""
        key = (id(parsed), id(state))  # both live as long as the question (_pools, _states)
        found = self._lefts.get(key)
        if found is not None:
            return found
        derived = self._derived.get(id(state))
        if derived is None:
            # The engine's judgement of the pool worked it out for the same allocations.
            given = self._given.get(id(state))
            known = given[1].get(id(parsed)) if given is not None and given[0] is state else None
            found = counters_left(parsed, state) if known is None else known
        else:
            base, names = derived
            found = dict(self.left_of(parsed, base))
            for name in names:
                if state.debits(name) and not base.debits(name):
                    for debits in parsed.counted_of(name):
                        for ck, q in debits:
                            if ck in found:
                                found[ck] -= q.nanos
        self._lefts[key] = found
        return found

    def pools_at(self, node: NodeName, combo: int, taken: tuple[Taken, ...]) -> list[NodePool]:
        """The node's pools with the copies' devices taken."""
        by_pool: dict[PoolKey, list[Taken]] = {}
        for t in taken:
            by_pool.setdefault((t.driver, t.pool), []).append(t)
        out = []
        for p in self.pools(node, combo):
            mine = by_pool.get((p.driver, p.pool))
            out.append(p if not mine else p.holding(self._allocated(p, tuple(mine))))
        return out

    def resumes_on(self, node: NodeName) -> bool:
        """Whether the node's searches may begin where the copy before found its first
        device (`resumable`): not where its pools hold a shareable device."""
        found = self._resumes.get(node)
        if found is None:
            found = self._resumes[node] = self.resumable and not any(
                any(map(_SHAREABLE, devices))  # a C pass over every device of the node
                for combo in range(len(self.combos))
                for p in self.pools(node, combo)
                for devices in p.slices
            )
        return found

    def relevant(self, node: NodeName) -> set[PoolKey]:
        """The pools of the node that hold a device the first copy's selectors match or
        fail on: only a copy on one of these can change what this node answers."""
        found = self._relevant.get(node)
        if found is not None:
            return found
        out: set[PoolKey] = set()
        self._relevant[node] = out
        for combo in range(len(self.combos)):
            pools = self.pools(node, combo)
            out.update(pools_met(self.first.claim, self.classes, pools, self.cel, self.rules))
        return out

    def outcomes(self, node: NodeName, combo: int, state: State) -> list[Outcome]:
        """Every outcome of the node's Allocate call for the next copy (over the walk
        orders of a map-ordered allocator), each distinct solution once."""
        copies, taken = state
        if not self.shared_requests:
            # Only the copies' devices in pools this node's walk can meet change its
            # answer: the same answer for every state that agrees on them.
            relevant = self.relevant(node)
            taken = tuple(t for t in taken if (t.driver, t.pool) in relevant)
        key = (combo, taken, copies if self.shared_requests else min(copies, 1))
        mine = self._outcomes.get(node)
        if mine is None:
            mine = self._outcomes[node] = {}
        cached = mine.get(key)
        if cached is not None:
            return cached
        kept = self._read_kept(node, key)
        if kept is not None:
            mine[key] = kept
            return kept
        merged = self.first if copies == 0 else self.merged
        pools = self.pools_at(node, combo, taken)
        found: list[Outcome] = []
        if copies and self.shared_requests:
            wanted = {
                (t.driver, t.pool, t.device) for t in taken if t.request in self.shared_requests
            }
            seen = {d.id for p in pools for sl in p.slices for d in sl if d.reaches}
            if not wanted <= seen:
                found.append(("no", ()))
                mine[key] = found
                return found
        if self.rules.pools_sorted:
            starts = self._starts.get(node)
            if starts is None:
                starts = self._starts[node] = {}
            resumes = self.resumes_on(node)
            start = starts.get((combo, taken), ORIGIN) if resumes else ORIGIN
            outcome, first_at, reached = self._search(merged, pools, None, start)
            found.append(outcome)
            if outcome[0] in ("ok", "no"):
                self._remember(node, key, reached)
            if resumes and first_at is not None and outcome[0] == "ok":
                after = tuple(
                    t for t in sorted((*taken, *outcome[1])) if (t.driver, t.pool) in relevant
                )
                starts[(combo, after)] = first_at
        else:
            rel = relevance(merged.claim, self.classes, pools, self.cel, self.rules)
            rel.hazard = True  # every order: the devices taken depend on it
            pending: list[tuple[int, ...]] = [()]
            while pending:
                prefix = pending.pop()
                try:
                    outcome, _, _ = self._search(merged, pools, Chooser(rel, prefix))
                except NeedChoice as need:
                    pending.extend((*prefix, o) for o in reversed(need.options))
                    continue
                if outcome not in found:
                    found.append(outcome)
        mine[key] = found
        return found

    def _read_kept(self, node: NodeName, key: OutcomeKey) -> list[Outcome] | None:
        """An outcome an earlier asking kept, counted as the search it stands for."""
        kept = self._kept.get(node)
        hit = kept.pop(key, None) if kept else None
        if hit is None:
            return None
        self.searches += 1
        self._remember(node, key, hit[1])
        return hit[0]

    def _remember(self, node: NodeName, key: OutcomeKey, reached: Location) -> None:
        mine = self._reached.get(node)
        if mine is None:
            mine = self._reached[node] = {}
        mine[key] = reached

    def _search(
        self,
        merged: Merged,
        pools: list[NodePool],
        chooser: Chooser | None,
        start: Location = ORIGIN,
    ) -> tuple[Outcome, Location | None, Location]:
        """One Allocate call, where its first device was found, and how far its walk
        went (NodeSearch.reached)."""
        self.searches += 1
        search = NodeSearch(
            merged.claim,
            self.classes,
            pools,
            self.cel,
            SEARCH_STEPS,
            self.rules,
            chooser,
            max_results=self.max_results,
            claim_of=merged.claim_of,
            start=start,
            left_of=self.left_of,
        )
        try:
            answer = search.run()
        except SearchError as exc:
            return ("error", str(exc)), None, END
        except BudgetExceeded:
            return ("unknown", ()), None, END
        if answer != "ok":
            return ("no", ()), None, END
        return ("ok", taken_of(search.picks)), search.first_at, search.reached

    @property
    def spent(self) -> bool:
        return self.searches >= self.budget


def _takes_moved(found: list[Outcome], taking: Mapping[PoolKey, PoolChange]) -> bool:
    """Whether an outcome took a device that changes which only took devices move."""
    return any(
        o == "ok"
        and isinstance(d, tuple)
        and touches(((t.driver, t.pool, t.device) for t in d), taking)
        for o, d in found
    )


def _changed(
    before: Sequence[PoolResult],
    results: Sequence[PoolResult],
    by_key: dict[PoolKey, PoolResult],
    was: dict[PoolKey, PoolResult],
) -> tuple[set[PoolKey], dict[PoolKey, PoolResult]]:
    """The keys of the pools whose results are not the objects they were, and the results
    by key (`by_key`, those of `before`, updated in place when the pools are the same in
    the same order, as the operator hands them: a thousand pools are compared by
    position rather than mapped again). `was` gets the changed pools' results before."""
    if len(before) == len(results):
        moved = [(results[i], before[i]) for i in changed_places(results, before)]
        if all(r.key == o.key for r, o in moved):
            for r, o in moved:
                by_key[r.key] = r
                was[r.key] = o
            return {r.key for r, _ in moved}, by_key
    now = {r.key: r for r in results}
    keys = {k for k in now.keys() | by_key.keys() if now.get(k) is not by_key.get(k)}
    was.update((k, by_key[k]) for k in keys if k in by_key)
    return keys, now


# -- exploring a group of nodes -----------------------------------------------------------


@dataclass(slots=True)
class Reach:
    """What placements on one group of nodes can reach: the copies (depths) of the
    states where the next attempt may abort (`ends`), may go on (`goes`), where no node
    fits (`stuck`), and those left unexplored when the budget ended (`frontier`)."""

    ends: list[int] = field(default_factory=list)
    goes: list[int] = field(default_factory=list)
    stuck: list[int] = field(default_factory=list)
    frontier: list[int] = field(default_factory=list)
    start_goes: bool = True
    error: str = ""
    firsts: dict[NodeName, list[tuple[Taken, ...]]] = field(default_factory=dict)
    _summary: _Summary | None = None

    def summary(self) -> _Summary:
        if self._summary is None:
            self._summary = _Summary(
                self.start_goes,
                min((*self.stuck, *self.frontier), default=_INF),
                min((*self.ends, *self.frontier), default=_INF),
                bool(self.frontier),
                max(self.stuck, default=-1),
                max(self.goes, default=-1),
                max(self.ends, default=-1),
            )
        return self._summary


def resumable(merged: Merged, first: Merged, rules: Rules) -> bool:
    """Whether a copy's search may begin where the search that placed the copy before it
    on the same node found its first device.

    The allocator's walk (pools sorted) returns the first solution in walk order. More
    devices taken only ever remove solutions, so the next copy's solution is no earlier
    than the last one, and every device the walk passed over for the first slot before
    it leads to none now: the walk may start there. What it skips met no CEL error then,
    and meets none now (a device in use is refused before its selectors run). This holds
    for plain requests, one device choice each (ExactCount), without constraints; a
    firstAvailable list, allocationMode All, constraints (with the allocator's
    remembered-attribute quirks) and shared claims are searched from the start. So is a
    node whose pools hold a shareable device (Question.resumes_on): a share an earlier
    copy took changes what later requests of a copy can get from it and its counters,
    so a device the walk passed over may lead to a solution now (seed 20566 at 1.36: a
    copy's first request takes a NIC the copy before had to pass over)."""
    if first is not merged or not rules.pools_sorted or merged.claim.constraints:
        return False
    return all(
        not r.prioritized and len(r.choices) == 1 and r.choices[0].allocation_mode == "ExactCount"
        for r in merged.claim.requests
    )


def merge_state(state: State, taken: tuple[Taken, ...]) -> State:
    return (state[0] + 1, tuple(sorted((*state[1], *taken))))


def explore(q: Question, nodes: Sequence[NodeName], cap: int | None) -> Reach:
    reach = Reach()
    level: list[State] = [START]
    seen: set[State] = {START}
    while level:
        following: list[State] = []
        for state in level:
            depth = state[0]
            if cap is not None and depth >= cap:
                reach.goes.append(depth)
                reach.stuck.append(depth)
                continue
            if q.spent:
                reach.frontier.append(depth)
                continue
            ends = goes = unknown = stuck = False
            nexts: list[tuple[NodeName, tuple[Taken, ...]]] = []
            for combo in range(len(q.combos)):
                certain = possible = False
                misses = True  # every node may answer no: the attempt may place nothing
                fits: list[tuple[NodeName, tuple[Taken, ...]]] = []
                for node in nodes:
                    found = q.outcomes(node, combo, state)
                    misses = misses and any(o == "no" for o, _ in found)
                    errors = [str(d) for o, d in found if o == "error"]
                    if errors:
                        possible = True
                        certain = certain or len(errors) == len(found)
                        reach.error = reach.error or errors[0]
                    unknown = unknown or any(o == "unknown" for o, _ in found)
                    fits.extend((node, d) for o, d in found if o == "ok" and isinstance(d, tuple))
                ends = ends or possible
                if not certain:
                    goes = True
                    nexts.extend(fits)
                    # Under this listing (and, in 1.34 and 1.35, these walk orders) no
                    # node fits: the copies may end here.
                    stuck = stuck or misses
            if depth == 0:
                reach.start_goes = goes
                for node, taken in nexts:
                    options = reach.firsts.setdefault(node, [])
                    if taken not in options:
                        options.append(taken)
            if unknown:
                reach.frontier.append(depth)
            if ends:
                reach.ends.append(depth)
            if goes:
                reach.goes.append(depth)
                if stuck and not unknown:
                    reach.stuck.append(depth)
            for _, taken in nexts:
                nxt = merge_state(state, taken)
                if nxt not in seen:
                    seen.add(nxt)
                    following.append(nxt)
        level = following
    return reach


def bounds(reaches: Sequence[Reach]) -> tuple[int, int | None]:
    """(fits whatever the placement, fits at most) over groups explored apart: a copy
    goes to one group at a time, and an attempt that aborts in one group ends them all."""
    return Tally(reaches).bounds()


class Tally:
    """What `bounds` reads of each group's reach, kept as sums and counts that a question
    asked again patches where a few groups were explored again, rather than summing a
    thousand reaches (or a thousand entries, in C) again at each asking."""

    def __init__(self, reaches: Sequence[Reach]) -> None:
        self.stalled = 0  # groups whose first copy does not go on
        self.frontiers = 0  # groups the budget ended in
        self.low_stuck = 0  # summed over the groups
        self.max_stuck = 0
        self.max_goes = 0
        self.no_max_stuck = 0  # groups with none (max_stuck -1)
        self.never = 0  # groups whose copies never go on (max_goes -1)
        # Each low_end with how many groups have it: a few depths, so min is cheap.
        self.low_ends: Counter[int] = Counter()
        self.ends: dict[int, _Summary] = {}  # groups an attempt may abort in (max_end >= 0)
        self._kept: list[_Summary | None] = [None] * len(reaches)
        for i, r in enumerate(reaches):
            self.put(i, r)

    def put(self, i: int, reach: Reach) -> None:
        """Group i's reach is `reach` now."""
        before, m = self._kept[i], reach.summary()
        if before is not None:
            self._add(before, -1)
            self.ends.pop(i, None)
        self._kept[i] = m
        self._add(m, 1)
        if m.max_end >= 0:
            self.ends[i] = m

    def _add(self, m: _Summary, sign: int) -> None:
        self.stalled += sign * (not m.start_goes)
        self.frontiers += sign * m.frontier
        self.low_stuck += sign * m.low_stuck
        self.max_stuck += sign * m.max_stuck
        self.max_goes += sign * m.max_goes
        self.no_max_stuck += sign * (m.max_stuck < 0)
        self.never += sign * (m.max_goes == -1)
        self.low_ends[m.low_end] += sign
        if not self.low_ends[m.low_end]:
            del self.low_ends[m.low_end]

    def bounds(self) -> tuple[int, int | None]:
        if not self._kept or self.stalled:
            return 0, 0
        lowest = min(self.low_stuck, min(self.low_ends))
        if self.frontiers:
            return (0 if lowest >= _INF else lowest), None
        best = -1
        if not self.no_max_stuck:
            best = self.max_stuck
        # A group's attempt may end in an abort after its deepest end while every other
        # group went as deep as it can: only when no other group never goes on.
        never = self.never
        for m in self.ends.values():
            goes = m.max_goes
            if never == 0 or (never == 1 and goes < 0):
                best = max(best, m.max_end + self.max_goes - goes)
        lowest = 0 if lowest >= _INF else lowest
        return lowest, max(best, lowest)


_INF = 1 << 62


@dataclass(frozen=True, slots=True)
class _Summary:
    """What bounds reads of a reach, worked out once (a kept reach is summed again at
    every asking)."""

    start_goes: bool
    low_stuck: int  # the shallowest depth the copies may stop at (or the budget ended)
    low_end: int  # the shallowest depth an attempt may abort at (or the budget ended)
    frontier: bool
    max_stuck: int  # -1: none
    max_goes: int  # -1: none
    max_end: int  # -1: none


def node_groups(q: Question, nodes: Sequence[NodeName]) -> list[list[NodeName]]:
    """Nodes joined when they gather a common relevant pool."""
    return components(nodes, q.relevant)


@dataclass(slots=True)
class Placement:
    """One group's copies placed in turn on the first node that fits (fit.py's _greedy), why
    they ended, and (worked out when the next copy is explained) their allocations."""

    path: Path
    why: str
    refs: dict[PoolKey, list[AllocRef]] | None = None
