"""How many copies of a workload fit: placed one after another, as the scheduler places
Pods arriving one at a time, each copy on top of the allocations of those before, a
Pod's claims all on one node (one Allocate call for all of them).

Every copy is found by the port of the allocator's search (explain/search.py) on every
node, as the scheduler's Filter runs it; the scheduler then picks one of the nodes that
fit by scores DRA does not decide. So the answer is a range over every such choice:

- Nodes are grouped by the pools that hold devices the workload's selectors match (or
  fail on): a copy placed on one node changes nothing for a node of another group. A
  node that shares no such pool with another is a group of its own, and its copies are
  one chain of searches.
- Within a group of several nodes (network-attached or multi-node pools), every state
  reachable by some choice of nodes is explored, breadth first (states are the sets of
  devices taken, so choices that lead to the same devices are explored once).
- Where the profile's allocator walks pools in map order (1.34, 1.35), each search is
  run over every walk order, and every distinct solution is a possible next state; where
  slices of a pool disagree on resourceSliceCount, over every count the list can make
  the allocator trust.
- An attempt that ends in an error on any node (a CEL runtime error, allocationMode All
  over an incomplete pool...) aborts: no later copy is placed.

From what each group can reach, `copies` is what fits whatever the placement and
`max_copies` what the luckiest placement fits. The search budget counts node searches
(one Allocate call each); when it ends first, `copies` is still a proven lower bound and
`max_copies` is unknown (`bounded`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice, product

from draview.api.claims import Constraint, Request, ResourceClaim
from draview.api.taints import DeviceClass
from draview.api.workload import Workload
from draview.api.world import World
from draview.cel import CelEngine
from draview.engine.allocations import index_allocations
from draview.engine.model import AllocRef, EngineOptions, PoolKey
from draview.engine.pool import PoolResult
from draview.engine.rules import Rules, as_read, refusal, rules_for
from draview.engine.validate import CounterKey, ParsedPool
from draview.engine.verdict import AllocatedState, counters_left
from draview.engine.world import compute_world, judge_again
from draview.explain.allocatable import MAX_COMBINATIONS
from draview.explain.gather import (
    Assignment,
    GatherIndex,
    NodePool,
    ambiguous,
    ambiguous_pool,
    node_pools,
)
from draview.explain.index import DeviceIndex, PoolDevices, index_pool
from draview.explain.model import ClaimExplanation
from draview.explain.orders import Chooser, NeedChoice, pools_met, relevance
from draview.explain.search import (
    MAX_RESULTS,
    ORIGIN,
    BudgetExceeded,
    Location,
    NodeSearch,
    Pick,
    SearchError,
)
from draview.explain.why import Explainer

# Node searches (one Allocate call on one node each) one question may spend.
FIT_BUDGET = 20_000
# Steps one node search may take (explain/search.py), as `why` allows.
SEARCH_STEPS = 200_000

NodeName = str | None


@dataclass(frozen=True, slots=True, order=True)
class Taken:
    """One device result of one copy: what the state after the copy holds."""

    driver: str
    pool: str
    device: str
    request: str  # as the allocator names it in the merged claim (see _Merged)
    admin_access: bool = False
    shared: bool = False  # a share of a shareable device
    consumed: tuple[tuple[str, str], ...] = ()  # consumedCapacity of a share


# The devices taken by the copies placed so far, sorted: copies are interchangeable,
# so two placements that took the same devices are the same state.
State = tuple[int, tuple[Taken, ...]]  # (copies, taken)
START: State = (0, ())


@dataclass(frozen=True, slots=True)
class FitDevice:
    """A device the first copy gets, as its claim's allocation result names it."""

    claim: str
    request: str
    driver: str
    pool: str
    device: str
    consumed: tuple[tuple[str, str], ...] = ()
    admin_access: bool = False


@dataclass(slots=True)
class NodeFit:
    """What one node alone takes: the copies it fits with no copy on any other node."""

    name: NodeName
    copies: int
    max_copies: int | None
    bounded: bool = False
    devices: tuple[FitDevice, ...] = ()  # of its first copy
    devices_vary: bool = False  # the walk order decides which (1.34, 1.35)
    error: str = ""  # an error that aborts the attempt on this node


@dataclass(slots=True)
class FitResult:
    workload: str
    copies: int  # fit whatever the placement; a lower bound when `bounded`
    max_copies: int | None  # fit by the luckiest placement; None when `bounded`
    bounded: bool
    count: int | None
    nodes: list[NodeFit] = field(default_factory=list)
    stopped: str = ""  # count | unallocatable | aborts | budget
    blocker: str = ""  # what keeps copy copies+1 out, in `why`'s words
    blocked: list[ClaimExplanation] = field(default_factory=list)
    first_node: NodeName = None  # where the first copy goes when the first node is taken
    first: tuple[FitDevice, ...] = ()
    notes: list[str] = field(default_factory=list)
    searches: int = 0

    @property
    def placement_dependent(self) -> bool:
        return self.max_copies is None or self.max_copies != self.copies


class FitError(ValueError):
    """The workload cannot be asked about this world (an unknown DeviceClass...)."""


# -- the claims of one copy, searched as one ----------------------------------------------


@dataclass(frozen=True, slots=True)
class _Merged:
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


def _merge(claims: Sequence[ResourceClaim]) -> _Merged:
    names = tuple(c.name for c in claims)
    if len(claims) == 1:
        return _Merged(claims[0], names, False, {})
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
    return _Merged(merged, names, True, of)


# -- one node's searches ------------------------------------------------------------------

# One outcome of one node's Allocate call: ("ok", devices) | ("no", ()) | ("error", msg)
# | ("unknown", ()) when its search ran out of steps.
Outcome = tuple[str, tuple[Taken, ...] | str]


def _taken(picks: Sequence[Pick]) -> tuple[Taken, ...]:
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


class _Question:
    """One workload asked of one world: the pools each node gathers, what the copies took."""

    def __init__(
        self,
        world: World,
        results: Sequence[PoolResult],
        base: Mapping[PoolKey, Sequence[AllocRef]],
        rules: Rules,
        merged: _Merged,
        first: _Merged,
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
        self._by_key = {r.key: r for r in results}
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
        self._states: dict[PoolKey, dict[tuple[Taken, ...], AllocatedState]] = {}
        # left_of's memo, and the engine's state each of _states adds devices to.
        self._lefts: dict[tuple[int, int], Mapping[CounterKey, int]] = {}
        self._derived: dict[int, tuple[AllocatedState, set[str]]] = {}
        self._outcomes: dict[NodeName, dict[tuple[int, tuple[Taken, ...], int], list[Outcome]]] = {}
        self.max_results = MAX_RESULTS  # each claim of the Pod (search.NodeSearch)
        self.tried: list[NodeName] = []  # the nodes copies may go to
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
        # Where the search from each state may begin (outcomes, `_resumable`).
        self._starts: dict[NodeName, dict[tuple[int, tuple[Taken, ...]], Location]] = {}
        self.resumable = _resumable(merged, first, rules)

    def renew(
        self, results: Sequence[PoolResult], base: Mapping[PoolKey, Sequence[AllocRef]]
    ) -> set[NodeName] | None:
        """Take the pools as judged now, for the same question asked again (FitMemo):
        the nodes that gather a pool judged again (or gone, or new), whose cached pools
        and searches are forgotten. None when the question must start over: a pool that
        every node gathers, or whose slices disagree on resourceSliceCount, changed."""
        now = {r.key: r for r in results}
        old = self._by_key
        changed = {k for k in now.keys() | old.keys() if now.get(k) is not old.get(k)}
        affected: set[NodeName] = set()
        for key in changed:
            if key in self.shaky or key in self.index.bystanders:
                return None
            affected.update(self.index.nodes_of(key))
            r = now.get(key)
            if r is None:
                self.index.drop(key)
                continue
            if ambiguous_pool(r) is not None:
                return None
            self.index.put(r)
            if key in self.index.bystanders:
                return None
            affected.update(self.index.nodes_of(key))
        self.results, self.base, self._by_key = results, base, now
        self.searches = 0
        # What the affected nodes' relevant pools were: groups stay as they were when
        # these come out the same (FitMemo.groups_of).
        self.relevant_before = {n: self._relevant.get(n) for n in affected}
        for node in affected:
            self._pools.pop(node, None)
            self._relevant.pop(node, None)
        self.forget_searches(affected)
        for key in changed:
            for state in self._states.pop(key, {}).values():
                self._derived.pop(id(state), None)
        # Keyed by the ids of views and states: those of a pool judged again may be
        # reused by new objects.
        self._lefts.clear()
        return affected

    def shed(self) -> None:
        """Between askings (FitMemo): drop the nodes' pools, the states the copies made
        and the searches. The next asking searches only the nodes of groups that changed,
        whose searches are forgotten then anyway, and builds these again for them."""
        for kept in (self._pools, self._states, self._derived, self._lefts):
            kept.clear()
        self._outcomes.clear()
        self._starts.clear()

    def forget_searches(self, nodes: Iterable[NodeName]) -> None:
        """Forget the nodes' outcomes: searched again, they cost what a new question's
        searches cost (the budget counts them alike)."""
        for node in nodes:
            self._outcomes.pop(node, None)
            self._starts.pop(node, None)

    def nodes(self) -> list[NodeName]:
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
        return found

    def _allocated(self, pool: NodePool, taken: tuple[Taken, ...]) -> AllocatedState:
        key = (pool.driver, pool.pool)
        states = self._states.get(key)
        if states is None:
            states = self._states[key] = {}
        found = states.get(taken)
        if found is None:
            refs = list(self.base.get(key, ()))
            for i, t in enumerate(taken):
                refs.append(
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
                )
            found = states[taken] = AllocatedState.for_rules(refs, self.rules)
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
            found = counters_left(parsed, state)
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
            out.append(p if not mine else replace(p, allocated=self._allocated(p, tuple(mine))))
        return out

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
            start = starts.get((combo, taken), ORIGIN) if self.resumable else ORIGIN
            outcome, first_at = self._search(merged, pools, None, start)
            found.append(outcome)
            if self.resumable and first_at is not None and outcome[0] == "ok":
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
                    outcome, _ = self._search(merged, pools, Chooser(rel, prefix))
                except NeedChoice as need:
                    pending.extend((*prefix, o) for o in reversed(need.options))
                    continue
                if outcome not in found:
                    found.append(outcome)
        mine[key] = found
        return found

    def _search(
        self,
        merged: _Merged,
        pools: list[NodePool],
        chooser: Chooser | None,
        start: Location = ORIGIN,
    ) -> tuple[Outcome, Location | None]:
        """One Allocate call, and where its first device was found."""
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
            return ("error", str(exc)), None
        except BudgetExceeded:
            return ("unknown", ()), None
        if answer != "ok":
            return ("no", ()), None
        return ("ok", _taken(search.picks)), search.first_at

    @property
    def spent(self) -> bool:
        return self.searches >= self.budget


# -- exploring a group of nodes -----------------------------------------------------------


@dataclass(slots=True)
class _Reach:
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


def _resumable(merged: _Merged, first: _Merged, rules: Rules) -> bool:
    """Whether a copy's search may begin where the search that placed the copy before it
    on the same node found its first device.

    The allocator's walk (pools sorted) returns the first solution in walk order. More
    devices taken only ever remove solutions, so the next copy's solution is no earlier
    than the last one, and every device the walk passed over for the first slot before
    it leads to none now: the walk may start there. What it skips met no CEL error then,
    and meets none now (a device in use is refused before its selectors run). This holds
    for plain requests, one device choice each (ExactCount), without constraints; a
    firstAvailable list, allocationMode All, constraints (with the allocator's
    remembered-attribute quirks) and shared claims are searched from the start."""
    if first is not merged or not rules.pools_sorted or merged.claim.constraints:
        return False
    return all(
        not r.prioritized and len(r.choices) == 1 and r.choices[0].allocation_mode == "ExactCount"
        for r in merged.claim.requests
    )


def _merge_state(state: State, taken: tuple[Taken, ...]) -> State:
    return (state[0] + 1, tuple(sorted((*state[1], *taken))))


def _explore(q: _Question, nodes: Sequence[NodeName], cap: int | None) -> _Reach:
    reach = _Reach()
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
                nxt = _merge_state(state, taken)
                if nxt not in seen:
                    seen.add(nxt)
                    following.append(nxt)
        level = following
    return reach


def _bounds(reaches: Sequence[_Reach]) -> tuple[int, int | None]:
    """(fits whatever the placement, fits at most) over groups explored apart: a copy
    goes to one group at a time, and an attempt that aborts in one group ends them all."""
    if not reaches:
        return 0, 0
    sums = [r.summary() for r in reaches]
    if not all(m.start_goes for m in sums):
        return 0, 0
    stuck_sum = sum(m.low_stuck for m in sums)
    end_min = min(m.low_end for m in sums)
    lowest = min(stuck_sum, end_min)
    if any(m.frontier for m in sums):
        return (0 if lowest >= _INF else lowest), None
    best = -1
    if all(m.max_stuck >= 0 for m in sums):
        best = sum(m.max_stuck for m in sums)
    total_goes = sum(m.max_goes for m in sums)
    # A group's attempt may end in an abort after its deepest end while every other
    # group went as deep as it can: only when no other group never goes on.
    never = sum(m.max_goes < 0 for m in sums)
    for m in sums:
        if m.max_end >= 0 and (never == 0 or (never == 1 and m.max_goes < 0)):
            best = max(best, m.max_end + total_goes - m.max_goes)
    lowest = 0 if lowest >= _INF else lowest
    return lowest, max(best, lowest)


_INF = 1 << 62


@dataclass(frozen=True, slots=True)
class _Summary:
    """What _bounds reads of a reach, worked out once (a kept reach is summed again at
    every asking)."""

    start_goes: bool
    low_stuck: int  # the shallowest depth the copies may stop at (or the budget ended)
    low_end: int  # the shallowest depth an attempt may abort at (or the budget ended)
    frontier: bool
    max_stuck: int  # -1: none
    max_goes: int  # -1: none
    max_end: int  # -1: none


# -- asked again -------------------------------------------------------------------------

Path = list[tuple[NodeName, tuple[Taken, ...]]]


@dataclass(slots=True)
class FitMemo:
    """What asking one workload leaves for asking it again after some pools were judged
    again (a capacity probe, controller/capacity.py): the question's pools and searches
    per node, each group's reach and placement, each node's own answer, and per pool the
    judgement after the copies, its index and the explanation's fold of it.

    Everything kept is keyed by the PoolResult objects it came from: the caller hands
    the same object for a pool not judged again and a new one for a pool that was. Then
    only the nodes that gather such a pool are searched again, only the pools the copies
    moved in are judged again, and only those are explained again; the answer is the
    one a new question gives (tests/fidelity/test_fit_memo.py).

    It holds about what the question built: per node its pools' devices, and per pool
    its explanation's device lists."""

    key: object = None
    question: _Question | None = None
    reaches: dict[tuple[NodeName, ...], tuple[_Reach, int]] = field(default_factory=dict)
    alone: dict[NodeName, tuple[_Reach, int]] = field(default_factory=dict)
    node_fits: dict[NodeName, NodeFit | None] = field(default_factory=dict)
    # per group, per copies left to place (count): its placement
    greedy: dict[tuple[NodeName, ...], dict[int | None, _Placement]] = field(default_factory=dict)
    group_of: dict[NodeName, tuple[NodeName, ...]] = field(default_factory=dict)
    # per pool: the result and the copies' allocations it was indexed after
    indexed: dict[PoolKey, tuple[PoolResult, Sequence[AllocRef] | None, PoolDevices]] = field(
        default_factory=dict
    )
    _explainer: Explainer | None = None
    reused: bool = False  # this asking took some group's reach from an earlier one
    nodes: list[NodeName] | None = None  # tried at the last asking
    groups: list[tuple[NodeName, ...]] | None = None  # of those nodes

    def clear(self) -> None:
        for kept in (
            self.reaches,
            self.alone,
            self.node_fits,
            self.greedy,
            self.group_of,
            self.indexed,
        ):
            kept.clear()
        self.key, self.question, self._explainer, self.reused = None, None, None, False
        self.nodes = self.groups = None

    def begin(self, key: object, question: _Question) -> None:
        self.clear()
        self.key, self.question = key, question

    def renewed(
        self, key: object, results: Sequence[PoolResult], base: Mapping[PoolKey, Sequence[AllocRef]]
    ) -> _Question | None:
        """The question kept, brought up to `results`; None when it must start over."""
        self.reused = False
        q = self.question
        if q is None or key != self.key:
            return None
        affected = q.renew(results, base)
        if affected is None:
            return None
        for node in affected:
            self.drop_group(self.group_of.get(node, (node,)))
        return q

    def drop_group(self, group: tuple[NodeName, ...]) -> None:
        """Forget what was found for the group and each of its nodes."""
        self.reaches.pop(group, None)
        self.greedy.pop(group, None)
        for node in group:
            self.alone.pop(node, None)
            self.node_fits.pop(node, None)
            if self.group_of.get(node) == group:
                del self.group_of[node]

    def keep_group(self, group: tuple[NodeName, ...], reach: _Reach, cost: int) -> None:
        for node in group:
            old = self.group_of.get(node)
            if old is not None and old != group:
                self.drop_group(old)
            self.group_of[node] = group
        self.reaches[group] = (reach, cost)

    def index_after(
        self,
        world: World,
        opts: EngineOptions,
        results: Sequence[PoolResult],
        base: Mapping[PoolKey, Sequence[AllocRef]],
        placed: Mapping[PoolKey, Sequence[AllocRef]],
    ) -> DeviceIndex | None:
        """The index of the world after the copies, each pool indexed again only when
        it or its copies differ from the last asking's; None for a profile that judges
        pools with the world (1.34: an invalid pool changes the others)."""
        if not rules_for(opts.profile).invalid_pool_is_node_local:
            return None
        index = DeviceIndex()
        for r in results:
            refs = placed.get(r.key)
            hit = self.indexed.get(r.key)
            if hit is None or hit[0] is not r or not (hit[1] is refs or hit[1] == refs):
                judged = r
                if refs is not None:
                    judged = judge_again(r, [*base.get(r.key, ()), *refs], world, opts)
                hit = self.indexed[r.key] = (r, refs, index_pool(judged, world.taint_rules))
            index.add(r, hit[2])
        return index

    def groups_of(self, q: _Question, nodes: list[NodeName]) -> list[tuple[NodeName, ...]]:
        """_groups, or the groups of the last asking when the nodes are the same and no
        node gathering a pool judged again now finds other relevant pools."""
        same = self.groups is not None and self.nodes == nodes
        if same and all(q.relevant(n) == old for n, old in q.relevant_before.items()):
            assert self.groups is not None
            return self.groups
        self.nodes, self.groups = nodes, [tuple(g) for g in _groups(q, nodes)]
        return self.groups

    def explainer(self, cel: CelEngine) -> Explainer:
        if self._explainer is None or self._explainer.cel is not cel:
            self._explainer = Explainer(cel, keep_folds=True)
        return self._explainer

    def prune(self, results: Sequence[PoolResult]) -> None:
        """Forget the pools no longer judged."""
        keys = {r.key for r in results}
        for gone in [k for k in self.indexed if k not in keys]:
            del self.indexed[gone]
        if self._explainer is not None:
            self._explainer.prune_folds(keys)


# -- the question ---------------------------------------------------------------------------


def _groups(q: _Question, nodes: Sequence[NodeName]) -> list[list[NodeName]]:
    """Nodes joined when they gather a common relevant pool (union-find)."""
    parent: dict[NodeName, NodeName] = {n: n for n in nodes}

    def root(n: NodeName) -> NodeName:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    owner: dict[PoolKey, NodeName] = {}
    for n in nodes:
        for key in q.relevant(n):
            if key in owner:
                parent[root(n)] = root(owner[key])
            else:
                owner[key] = n
    groups: dict[NodeName, list[NodeName]] = {}
    for n in nodes:
        groups.setdefault(root(n), []).append(n)
    return list(groups.values())


def _devices(merged: _Merged, taken: tuple[Taken, ...]) -> tuple[FitDevice, ...]:
    out = []
    for t in taken:
        claim, request = merged.owner(t.request)
        out.append(
            FitDevice(claim, request, t.driver, t.pool, t.device, t.consumed, t.admin_access)
        )
    return tuple(sorted(out, key=lambda d: (d.claim, d.request, d.driver, d.pool, d.device)))


def _check(workload: Workload, classes: Mapping[str, DeviceClass]) -> None:
    for claim in (*workload.claims, *workload.shared):
        for req in claim.requests:
            for ch in req.choices:
                if not ch.device_class_name:
                    raise FitError(f"claim {claim.name}: request {req.name} names no DeviceClass")
                if ch.device_class_name not in classes:
                    raise FitError(
                        f'claim {claim.name}: request {req.name}: deviceclass "'
                        f'{ch.device_class_name}" not found'
                    )


def _copy_claim(claim: ResourceClaim, copy: int) -> ResourceClaim:
    """Copy `copy` of a claim of the workload, not allocated."""
    return claim.model_copy(
        update={
            "name": f"{claim.name}-{copy}" if copy else claim.name,
            "uid": f"fit-{claim.name}-{copy}",
            "results": (),
            "allocated": False,
        }
    )


def fit(
    world: World,
    workload: Workload,
    options: EngineOptions | None = None,
    count: int | None = None,
    budget: int = FIT_BUDGET,
    results: Sequence[PoolResult] | None = None,
    cel: CelEngine | None = None,
    allocations: Mapping[PoolKey, Sequence[AllocRef]] | None = None,
    memo: FitMemo | None = None,
) -> FitResult:
    """How many copies of `workload` fit in `world` (see the module's docstring).
    `count`: stop at that many; `results`: compute_world(world, options), when the
    caller has them; `allocations`: index_allocations(world.claims), when the caller
    has them (world.claims is then not read); `memo`: what asking the same workload
    last left (FitMemo), for a caller that asks again as pools are judged again."""
    opts = options or EngineOptions()
    rules = rules_for(opts.profile)
    classes = {c.name: c for c in world.classes}
    _check(workload, classes)
    if not workload.claims:
        raise FitError(
            f"every claim of {workload.label} is shared (resourceClaimName): DRA decides "
            "where its copies may run, not how many"
        )
    out = FitResult(workload.label, 0, 0, False, count)
    for claim in (*workload.claims, *workload.shared):
        refused = refusal(claim, rules)
        if refused is not None:
            out.stopped, out.blocker = "aborts", f"the scheduler aborts: {refused}"
            return out
    base = index_allocations(world.claims) if allocations is None else allocations
    if results is None:
        results = compute_world(world, opts, allocations=base)
    if cel is None:
        # Every device is met several times (grouping, searches, the explanation): its
        # selector results must stay cached for the whole question.
        devices = sum(len(fs.devices) for r in results if r.prepared for fs in r.prepared.flat)
        cel = CelEngine(max_results=max(200_000, 8 * devices))
    per_copy = [as_read(_copy_claim(c, 0), rules) for c in workload.claims]
    pending = [as_read(c, rules) for c in workload.shared if not c.allocated]
    merged = _merge(per_copy)
    first = _merge([*per_copy, *pending]) if pending else merged
    if memo is not None and workload.shared:
        memo = None  # copies share a claim: every node is one group, asked anew
    key = (workload, opts, count, budget, tuple(world.classes), tuple(world.taint_rules), id(cel))
    q = memo.renewed(key, results, base) if memo is not None else None
    if q is None:
        q = _Question(world, results, base, rules, merged, first, budget, cel)
        if memo is not None:
            memo.begin(key, q)
    nodes = _nodes_to_try(q, world, workload, out)
    groups: Sequence[Sequence[NodeName]]
    if pending:
        # The first copy allocates the shared claims; every later copy must reach them:
        # all nodes are one group, and later copies are searched only where they reach.
        groups = [nodes]
        out.notes.append(
            "copies share " + ", ".join(c.name for c in pending) + ", allocated with the first copy"
        )
    elif memo is not None:
        groups = memo.groups_of(q, nodes)
    else:
        groups = _groups(q, nodes)
    q.tried = nodes
    reaches = [_group_reach(q, g, count, memo) for g in groups]
    out.copies, out.max_copies = _bounds(reaches)
    if count is not None:
        out.copies = min(out.copies, count)
        if out.max_copies is not None:
            out.max_copies = min(out.max_copies, count)
    out.bounded = out.max_copies is None
    out.nodes = _alone(q, nodes, groups, reaches, count, bool(pending), memo)
    if memo is not None and memo.reused and q.spent:
        # The budget ended: which searches it cut off depends on the order of all of
        # them, so the answer is that of a question asked anew.
        memo.clear()
        return fit(world, workload, opts, count, budget, results, cel, base, memo)
    out.searches = q.searches
    _first_and_blocker(q, out, world, opts, workload, count, per_copy, pending, groups, memo)
    if memo is not None:
        if q.spent:
            memo.clear()  # what the budget cut off is no answer to keep
        else:
            memo.prune(results)
            q.shed()
    return out


def _group_reach(
    q: _Question, group: Sequence[NodeName], count: int | None, memo: FitMemo | None
) -> _Reach:
    """_explore of the group, or what it found when the question was last asked, if no
    node of the group gathers a pool judged again since (the searches it cost counted
    again, as a new question would spend them)."""
    if memo is None:
        return _explore(q, group, count)
    key = tuple(group)
    hit = memo.reaches.get(key)
    if hit is not None:
        memo.reused = True
        q.searches += hit[1]
        return hit[0]
    memo.drop_group(key)
    q.forget_searches(group)
    before = q.searches
    reach = _explore(q, group, count)
    memo.keep_group(key, reach, q.searches - before)
    return reach


def _alone(
    q: _Question,
    nodes: Sequence[NodeName],
    groups: Sequence[Sequence[NodeName]],
    reaches: Sequence[_Reach],
    count: int | None,
    shared: bool,
    memo: FitMemo | None = None,
) -> list[NodeFit]:
    """What each node takes with no copy on any other (a group of its own already says
    it; `shared`: copies share a claim the first allocates, so no node is alone)."""
    alone: dict[NodeName, _Reach] = {
        g[0]: r for g, r in zip(groups, reaches, strict=True) if len(g) == 1
    }
    for g in groups:
        for n in g:
            if n in alone or shared:
                continue
            hit = memo.alone.get(n) if memo is not None else None
            if memo is not None and hit is not None:
                memo.reused = True
                q.searches += hit[1]
                alone[n] = hit[0]
                continue
            before = q.searches
            alone[n] = _explore(q, [n], count)
            if memo is not None:
                memo.alone[n] = (alone[n], q.searches - before)
    out = []
    for n in nodes:
        r = alone.get(n)
        if r is None:
            continue
        if memo is not None and n in memo.node_fits:
            found = memo.node_fits[n]
        else:
            found = _node_fit(q, n, r)
            if memo is not None:
                memo.node_fits[n] = found
        if found is not None:
            out.append(found)
    return out


def _node_fit(q: _Question, n: NodeName, r: _Reach) -> NodeFit | None:
    low, high = _bounds([r])
    firsts = r.firsts.get(n, [])
    if not firsts and not r.error and high == 0 and not q.relevant(n):
        return None  # nothing on this node could take a copy
    return NodeFit(
        n,
        low,
        high,
        high is None,
        _devices(q.first, firsts[0]) if firsts else (),
        len(firsts) > 1,
        r.error if r.ends else "",
    )


def _nodes_to_try(q: _Question, world: World, workload: Workload, out: FitResult) -> list[NodeName]:
    """The nodes copies may go to: those some pool has a view for, and where copies
    share an allocated claim, only those that reach its devices (said in `out`)."""
    nodes = q.nodes()
    if world.nodes is not None:
        # The cluster's nodes are known: no node is assumed beyond them. A node with no
        # view of any pool still gathers the pools every node does (their counter
        # slices, 1.35 and 1.36), and the attempt aborts there as anywhere: one such
        # node answers for all of them.
        known = [n for n in nodes if n is not None]
        viewless = sorted({n.name for n in world.nodes} - set(known))
        nodes = [*known, *viewless[:1]] if q.index.bystanders else [*known]
    pinned = [c for c in workload.shared if c.allocated]
    if pinned:
        nodes = [n for n in nodes if all(_reaches(q, n, c) for c in pinned)]
        out.notes.append(
            "copies share "
            + ", ".join(c.name for c in pinned)
            + f": only the {len(nodes)} node(s) that reach its devices are tried"
        )
    return nodes


def _reaches(q: _Question, node: NodeName, claim: ResourceClaim) -> bool:
    """Whether every device of an allocated claim reaches the node."""
    wanted = {(r.driver, r.pool, r.device) for r in claim.results if not r.admin_access}
    seen = {d.id for p in q.pools(node, 0) for s in p.slices for d in s if d.reaches}
    return wanted <= seen


def _greedy(
    q: _Question, nodes: Sequence[NodeName], count: int | None
) -> tuple[list[tuple[NodeName, tuple[Taken, ...]]], str]:
    """One placement: every copy on the first node (by name) that fits, walk order and
    trusted counts the first ones; with why it ended."""
    state = START
    path: list[tuple[NodeName, tuple[Taken, ...]]] = []
    while count is None or state[0] < count:
        if q.spent:
            return path, "budget"
        pick: tuple[NodeName, tuple[Taken, ...]] | None = None
        for node in nodes:
            found = q.outcomes(node, 0, state)
            for o, d in found:
                if o == "error" and len(found) == 1:
                    return path, f"aborts:{d}"
            if pick is None:
                ok = [d for o, d in found if o == "ok" and isinstance(d, tuple)]
                if ok:
                    pick = (node, ok[0])
        if pick is None:
            return path, "unallocatable"
        path.append(pick)
        state = _merge_state(state, pick[1])
    return path, "count"


def _first_and_blocker(
    q: _Question,
    out: FitResult,
    world: World,
    opts: EngineOptions,
    workload: Workload,
    count: int | None,
    per_copy: Sequence[ResourceClaim],
    pending: Sequence[ResourceClaim],
    groups: Sequence[Sequence[NodeName]],
    memo: FitMemo | None = None,
) -> None:
    # Groups are independent: each placed on its own ends where the copies placed in
    # turn on the first node that fits would end.
    segments: list[_Placement] = []
    placed = 0
    why = "unallocatable"
    firsts: list[tuple[NodeName, tuple[Taken, ...]]] = []
    for group in groups:
        left = None if count is None else count - placed
        kept = memo.greedy.setdefault(tuple(group), {}) if memo is not None else {}
        hit = kept.get(left)
        if hit is None:
            hit = kept[left] = _Placement(*_greedy(q, group, left))
        why = hit.why
        if hit.path:
            firsts.append(hit.path[0])
            segments.append(hit)
            placed += len(hit.path)
        if why != "unallocatable":
            break
    if firsts:
        first = min(firsts, key=lambda p: (p[0] is None, p[0] or ""))
        out.first_node, out.first = first[0], _devices(q.first, first[1])
    if why == "count":
        out.stopped = "count"
        out.blocker = f"{count} copies fit (--count)"
        return
    if why == "budget" or out.bounded:
        out.stopped = "budget"
        out.blocker = f"the search budget ({q.budget} node searches) ended after {placed} copies"
        return
    if why.startswith("aborts:"):
        out.stopped = "aborts"
        out.blocker = f"the scheduler aborts copy {placed + 1}: {why[len('aborts:') :]}"
        return
    out.stopped = "unallocatable"
    out.blocked, out.blocker = _explain_next(
        q, world, opts, workload, segments, per_copy, pending, memo
    )


@dataclass(slots=True)
class _Placement:
    """One group's copies placed in turn on the first node that fits (_greedy), why
    they ended, and (worked out when the next copy is explained) their allocations."""

    path: Path
    why: str
    refs: dict[PoolKey, list[AllocRef]] | None = None


def _explain_next(
    q: _Question,
    world: World,
    opts: EngineOptions,
    workload: Workload,
    segments: Sequence[_Placement],
    per_copy: Sequence[ResourceClaim],
    pending: Sequence[ResourceClaim],
    memo: FitMemo | None = None,
) -> tuple[list[ClaimExplanation], str]:
    """`why` for the claims of the next copy, in the world with the copies placed in
    `segments` (each group's, which hold no node in common)."""
    placed: dict[PoolKey, list[AllocRef]] = {}
    for i, seg in enumerate(segments):
        if seg.refs is None:
            seg.refs = _placed(q, workload.namespace, seg.path, first=i == 0)
        for key, refs in seg.refs.items():
            placed[key] = [*placed[key], *refs] if key in placed else refs
    copies = sum(len(seg.path) for seg in segments)
    # Only the pools the copies took devices in are judged again, with the world's
    # allocations the question indexed and the copies' added.
    index = memo.index_after(world, opts, q.results, q.base, placed) if memo else None
    results: list[PoolResult] | None = None
    if index is None:
        results = _judged_after(q, world, opts, placed)
        index = DeviceIndex.build(results, world.taint_rules)
    explainer = memo.explainer(q.cel) if memo else Explainer(q.cel)
    claims = [_copy_claim(c, copies + 1) for c in per_copy]
    if not copies:
        claims.extend(pending)
    # The estimate's words first (every device's reason); the search only where the
    # estimate cannot say why (a combination, a constraint): it costs a search per node.
    explained = []
    for c in claims:
        found = explainer.explain(c, index, world.classes, rules=world.taint_rules)
        if found.verdict not in ("Unallocatable", "Error"):
            if results is None:
                results = _judged_after(q, world, opts, placed)
            found = explainer.explain(
                c, index, world.classes, results=results, rules=world.taint_rules
            )
        explained.append(found)
    stuck = [e for e in explained if e.verdict != "Allocatable"]
    if not stuck and workload.shared:
        shared = ", ".join(c.name for c in workload.shared)
        return explained, (
            f"the copy's own claims would fit, but not on a node that reaches {shared}, "
            "which every copy shares"
        )
    if not stuck:
        return explained, (
            "each claim of the copy would fit alone, but not all of them on one node together"
        )
    first = stuck[0]
    label = f"claim {first.name}: " if len(claims) > 1 else ""
    return stuck, label + first.summary


def _judged_after(
    q: _Question, world: World, opts: EngineOptions, placed: Mapping[PoolKey, Sequence[AllocRef]]
) -> list[PoolResult]:
    """The world judged after the copies: the pools they took devices in again."""
    allocations = dict(q.base)
    for key, refs in placed.items():
        allocations[key] = [*q.base.get(key, ()), *refs]
    return compute_world(world, opts, q.results, set(placed), allocations)


def _placed(q: _Question, namespace: str, path: Path, first: bool) -> dict[PoolKey, list[AllocRef]]:
    """The copies placed along `path`, as the allocations of the claims they would be,
    by pool. A copy is named by its node and its place among that node's copies
    (`gpu-copy-2@node-a`), not by its place in the path: so what a pool holds depends
    only on the copies placed where it reaches, and a pool no copy moved to or from
    keeps its judgement when the question is asked again (FitMemo)."""
    out: dict[PoolKey, list[AllocRef]] = {}
    on_node: dict[NodeName, int] = {}
    for k, (node, taken) in enumerate(path):
        merged = q.first if first and k == 0 else q.merged
        j = on_node[node] = on_node.get(node, 0) + 1
        where = f"{j}@{node}" if node is not None else f"{j}"
        shares: dict[str, int] = {}
        for t in taken:
            claim, request = merged.owner(t.request)
            share = None
            if t.shared:
                share = f"fit-{where}-{shares.get(claim, 0)}"
                shares[claim] = shares.get(claim, 0) + 1
            out.setdefault((t.driver, t.pool), []).append(
                AllocRef(
                    device=t.device,
                    claim_namespace=namespace,
                    claim_name=f"{claim}-copy-{where}",
                    claim_uid=f"fit-{where}-{claim}",
                    request=request,
                    admin_access=t.admin_access,
                    share_id=share,
                    consumed=t.consumed,
                )
            )
    return out


def iter_nodes(result: FitResult) -> Iterator[NodeFit]:
    """The nodes that fit some copy first, then the rest, each by name."""
    yield from sorted(result.nodes, key=lambda n: (-(n.max_copies or n.copies), n.name or "~"))
