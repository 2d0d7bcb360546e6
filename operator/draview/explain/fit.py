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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice, product

from draview.api.claims import AllocationResult, Constraint, Request, ResourceClaim
from draview.api.taints import DeviceClass
from draview.api.workload import Workload
from draview.api.world import World
from draview.cel import CelEngine
from draview.engine.allocations import claim_allocations, index_allocations
from draview.engine.model import AllocRef, EngineOptions, PoolKey
from draview.engine.pool import PoolResult
from draview.engine.rules import Rules, as_read, refusal, rules_for
from draview.engine.validate import CounterKey, ParsedPool
from draview.engine.verdict import AllocatedState, counters_left
from draview.engine.world import compute_world
from draview.explain.allocatable import MAX_COMBINATIONS
from draview.explain.gather import Assignment, GatherIndex, NodePool, ambiguous, node_pools
from draview.explain.index import DeviceIndex
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
        self.world = world
        self.results = results
        self.rules = rules
        self.merged, self.first = merged, first
        self.classes: dict[str, DeviceClass] = {c.name: c for c in world.classes}
        self.taint_rules = tuple(world.taint_rules) if rules.taint_rules else ()
        self.cel = cel
        self.budget = budget
        self.searches = 0
        self.index = GatherIndex.build(results)
        shaky = ambiguous(results)
        # Where slices disagree on resourceSliceCount, every count the list may make
        # the allocator trust (as `why` tries them).
        self.combos: list[dict[PoolKey, Assignment]] = [
            dict(zip(shaky, c, strict=True))
            for c in islice(product(*shaky.values()), MAX_COMBINATIONS)
        ]
        self.base = base  # the world's allocations by pool (index_allocations)
        self._pools: dict[tuple[NodeName, int], list[NodePool]] = {}
        self._states: dict[tuple[PoolKey, tuple[Taken, ...]], AllocatedState] = {}
        # left_of's memo, and the engine's state each of _states adds devices to.
        self._lefts: dict[tuple[int, int], Mapping[CounterKey, int]] = {}
        self._derived: dict[int, tuple[AllocatedState, set[str]]] = {}
        self._outcomes: dict[tuple[NodeName, int, tuple[Taken, ...], int], list[Outcome]] = {}
        self.max_results = MAX_RESULTS  # each claim of the Pod (search.NodeSearch)
        self.tried: list[NodeName] = []  # the nodes copies may go to
        self._relevant: dict[NodeName, set[PoolKey]] = {}
        # The requests of the shared claims the first copy allocates: later copies go
        # only where their devices reach.
        own = set(merged.names)
        self.shared_requests = (
            {r.name for r in first.claim.requests if first.owner(r.name)[0] not in own}
            if first is not merged
            else set()
        )
        # Where the search from each state may begin (outcomes, `_resumable`).
        self._starts: dict[tuple[NodeName, int, tuple[Taken, ...]], Location] = {}
        self.resumable = _resumable(merged, first, rules)

    def nodes(self) -> list[NodeName]:
        return self.index.nodes()

    def pools(self, node: NodeName, combo: int) -> list[NodePool]:
        key = (node, combo)
        found = self._pools.get(key)
        if found is None:
            found = self._pools[key] = node_pools(
                node,
                self.index,
                self.taint_rules,
                self.combos[combo],
                self.rules.binding_pools_last,
            )
        return found

    def _allocated(self, pool: NodePool, taken: tuple[Taken, ...]) -> AllocatedState:
        key = (pool.driver, pool.pool)
        found = self._states.get((key, taken))
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
            found = self._states[(key, taken)] = AllocatedState.for_rules(refs, self.rules)
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
        key = (node, combo, taken, copies if self.shared_requests else min(copies, 1))
        cached = self._outcomes.get(key)
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
                self._outcomes[key] = found
                return found
        if self.rules.pools_sorted:
            start = self._starts.get((node, combo, taken), ORIGIN) if self.resumable else ORIGIN
            outcome, first_at = self._search(merged, pools, None, start)
            found.append(outcome)
            if self.resumable and first_at is not None and outcome[0] == "ok":
                after = tuple(
                    t for t in sorted((*taken, *outcome[1])) if (t.driver, t.pool) in relevant
                )
                self._starts[(node, combo, after)] = first_at
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
        self._outcomes[key] = found
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
    if not all(r.start_goes for r in reaches):
        return 0, 0
    inf = 1 << 62

    def low(values: Sequence[int]) -> int:
        return min(values, default=inf)

    stuck_sum = sum(low([*r.stuck, *r.frontier]) for r in reaches)
    end_min = min(low([*r.ends, *r.frontier]) for r in reaches)
    lowest = min(stuck_sum, end_min)
    if any(r.frontier for r in reaches):
        return (0 if lowest >= inf else lowest), None
    best = -1
    if all(r.stuck for r in reaches):
        best = sum(max(r.stuck) for r in reaches)
    goes = [max(r.goes, default=-1) for r in reaches]
    total_goes = sum(goes)
    for i, r in enumerate(reaches):
        if r.ends and all(g >= 0 for j, g in enumerate(goes) if j != i):
            best = max(best, max(r.ends) + total_goes - goes[i])
    lowest = 0 if lowest >= inf else lowest
    return lowest, max(best, lowest)


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
) -> FitResult:
    """How many copies of `workload` fit in `world` (see the module's docstring).
    `count`: stop at that many; `results`: compute_world(world, options), when the
    caller has them."""
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
    base = index_allocations(world.claims)
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
    q = _Question(world, results, base, rules, merged, first, budget, cel)
    nodes = _nodes_to_try(q, world, workload, out)
    if pending:
        # The first copy allocates the shared claims; every later copy must reach them:
        # all nodes are one group, and later copies are searched only where they reach.
        groups = [nodes]
        out.notes.append(
            "copies share " + ", ".join(c.name for c in pending) + ", allocated with the first copy"
        )
    else:
        groups = _groups(q, nodes)
    q.tried = nodes
    reaches = [_explore(q, g, count) for g in groups]
    out.copies, out.max_copies = _bounds(reaches)
    if count is not None:
        out.copies = min(out.copies, count)
        if out.max_copies is not None:
            out.max_copies = min(out.max_copies, count)
    out.bounded = out.max_copies is None
    out.nodes = _alone(q, nodes, groups, reaches, count, bool(pending))
    out.searches = q.searches
    _first_and_blocker(q, out, world, opts, workload, count, per_copy, pending, groups)
    return out


def _alone(
    q: _Question,
    nodes: Sequence[NodeName],
    groups: Sequence[Sequence[NodeName]],
    reaches: Sequence[_Reach],
    count: int | None,
    shared: bool,
) -> list[NodeFit]:
    """What each node takes with no copy on any other (a group of its own already says
    it; `shared`: copies share a claim the first allocates, so no node is alone)."""
    alone: dict[NodeName, _Reach] = {
        g[0]: r for g, r in zip(groups, reaches, strict=True) if len(g) == 1
    }
    for g in groups:
        for n in g:
            if n not in alone and not shared:
                alone[n] = _explore(q, [n], count)
    out = []
    for n in nodes:
        r = alone.get(n)
        if r is None:
            continue
        low, high = _bounds([r])
        firsts = r.firsts.get(n, [])
        if not firsts and not r.error and high == 0 and not q.relevant(n):
            continue  # nothing on this node could take a copy
        out.append(
            NodeFit(
                n,
                low,
                high,
                high is None,
                _devices(q.first, firsts[0]) if firsts else (),
                len(firsts) > 1,
                r.error if r.ends else "",
            )
        )
    return out


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
) -> None:
    # Groups are independent: each placed on its own ends where the copies placed in
    # turn on the first node that fits would end.
    path: list[tuple[NodeName, tuple[Taken, ...]]] = []
    why = "unallocatable"
    firsts: list[tuple[NodeName, tuple[Taken, ...]]] = []
    for group in groups:
        left = None if count is None else count - len(path)
        placed, why = _greedy(q, group, left)
        if placed:
            firsts.append(placed[0])
        path.extend(placed)
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
        out.blocker = f"the search budget ({q.budget} node searches) ended after {len(path)} copies"
        return
    if why.startswith("aborts:"):
        out.stopped = "aborts"
        out.blocker = f"the scheduler aborts copy {len(path) + 1}: {why[len('aborts:') :]}"
        return
    out.stopped = "unallocatable"
    out.blocked, out.blocker = _explain_next(q, world, opts, workload, path, per_copy, pending)


def _explain_next(
    q: _Question,
    world: World,
    opts: EngineOptions,
    workload: Workload,
    path: Sequence[tuple[NodeName, tuple[Taken, ...]]],
    per_copy: Sequence[ResourceClaim],
    pending: Sequence[ResourceClaim],
) -> tuple[list[ClaimExplanation], str]:
    """`why` for the claims of the next copy, in the world with the placed copies."""
    placed = _placed(q, workload, path)
    after = replace(world, claims=[*world.claims, *placed])
    # Only the pools the copies took devices in are judged again, with the world's
    # allocations the question indexed and the copies' added.
    touched = {(t.driver, t.pool) for _, taken in path for t in taken}
    allocations = dict(q.base)
    for c in placed:
        for key, refs in claim_allocations(c).items():
            allocations[key] = [*allocations.get(key, ()), *refs]
    results = compute_world(after, opts, q.results, touched, allocations)
    index = DeviceIndex.build(results, after.taint_rules)
    explainer = Explainer(q.cel)
    claims = [_copy_claim(c, len(path) + 1) for c in per_copy]
    if not path:
        claims.extend(pending)
    # The estimate's words first (every device's reason); the search only where the
    # estimate cannot say why (a combination, a constraint): it costs a search per node.
    explained = []
    for c in claims:
        found = explainer.explain(c, index, after.classes, rules=after.taint_rules)
        if found.verdict not in ("Unallocatable", "Error"):
            found = explainer.explain(
                c, index, after.classes, results=results, rules=after.taint_rules
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


def _placed(
    q: _Question, workload: Workload, path: Sequence[tuple[NodeName, tuple[Taken, ...]]]
) -> list[ResourceClaim]:
    """The copies placed along `path`, as the allocated claims they would be."""
    placed: list[ResourceClaim] = []
    for k, (_, taken) in enumerate(path):
        merged = q.first if k == 0 else q.merged
        by_claim: dict[str, list[AllocationResult]] = {}
        for t in taken:
            claim, request = merged.owner(t.request)
            by_claim.setdefault(claim, []).append(
                AllocationResult(
                    request=request,
                    driver=t.driver,
                    pool=t.pool,
                    device=t.device,
                    admin_access=t.admin_access,
                    share_id=f"fit-{k}-{len(by_claim.get(claim, []))}" if t.shared else None,
                    consumed_capacity=dict(t.consumed),
                )
            )
        for claim, res in by_claim.items():
            placed.append(
                ResourceClaim(
                    uid=f"fit-{k}-{claim}",
                    namespace=workload.namespace,
                    name=f"{claim}-copy-{k + 1}",
                    results=tuple(res),
                    allocated=True,
                )
            )
    return placed


def iter_nodes(result: FitResult) -> Iterator[NodeFit]:
    """The nodes that fit some copy first, then the rest, each by name."""
    yield from sorted(result.nodes, key=lambda n: (-(n.max_copies or n.copies), n.name or "~"))
