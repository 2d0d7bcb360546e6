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

from bisect import bisect_left, insort
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast, overload

from draview.api.claims import ResourceClaim
from draview.api.taints import DeviceClass
from draview.api.workload import Workload
from draview.api.world import World
from draview.cel import CelEngine
from draview.engine.allocations import index_allocations
from draview.engine.model import AllocRef, EngineOptions, PoolKey
from draview.engine.pool import PoolResult
from draview.engine.rules import Rules, as_read, refusal, rules_for
from draview.engine.world import compute_world
from draview.explain.fit_board import NO_FIRST, UNALLOCATABLE, Board, first_key
from draview.explain.fit_memo import FitMemo
from draview.explain.fit_search import (
    START,
    Merged,
    NodeName,
    Path,
    Placement,
    Question,
    Reach,
    ReadClaims,
    Taken,
    bounds,
    merge_claims,
    merge_state,
)
from draview.explain.index import DeviceIndex
from draview.explain.model import ClaimExplanation

# Node searches (one Allocate call on one node each) one question may spend.
FIT_BUDGET = 20_000


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
    nodes: Sequence[NodeFit] = ()
    # The nodes that take some copy (takes_some), in iter_nodes' order.
    ranked: Sequence[NodeFit] = ()
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


class Overgrown(Exception):
    """An asking told to stay small (fit's `small`) would have grown: the question
    asked anew, the groups made again or every node searched for the next copy's
    explanation. The caller asks again where time does not matter (the capacity
    module's worker thread). `kept`: the memo is left to go on from (the groups are
    made then); otherwise it is cleared."""

    def __init__(self, why: str, kept: bool = False) -> None:
        super().__init__(why)
        self.kept = kept


# -- the question ---------------------------------------------------------------------------


def _devices(merged: Merged, taken: tuple[Taken, ...]) -> tuple[FitDevice, ...]:
    out = []
    for t in taken:
        claim, request = merged.owner(t.request)
        out.append(
            FitDevice(claim, request, t.driver, t.pool, t.device, t.consumed, t.admin_access)
        )
    return tuple(sorted(out, key=lambda d: (d.claim, d.request, d.driver, d.pool, d.device)))


def check_workload(workload: Workload, classes: Mapping[str, DeviceClass]) -> None:
    """FitError for a workload that cannot be asked about (before any pool is looked at)."""
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
    if not workload.claims:
        raise FitError(
            f"every claim of {workload.label} is shared (resourceClaimName): DRA decides "
            "where its copies may run, not how many"
        )


def _aborts(workload: Workload, rules: Rules) -> str | None:
    """Why the scheduler aborts on a claim of the workload before any search, if it does."""
    for claim in (*workload.claims, *workload.shared):
        refused = refusal(claim, rules)
        if refused is not None:
            return refused
    return None


def _capped(found: tuple[int, int | None], count: int | None) -> tuple[int, int | None]:
    """The copies found and their most, asked with a count: no more than it."""
    copies, most = found
    if count is None:
        return found
    return min(copies, count), None if most is None else min(most, count)


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
    small: bool = False,
    changed: Collection[PoolKey] | None = None,
) -> FitResult:
    """How many copies of `workload` fit in `world` (see the module's docstring).
    `count`: stop at that many; `results`: compute_world(world, options), when the
    caller has them; `allocations`: index_allocations(world.claims), when the caller
    has them (world.claims is then not read); `memo`: what asking the same workload
    last left (FitMemo), for a caller that asks again as pools are judged again;
    `small`: raise Overgrown rather than do more than FitMemo.small promised;
    `changed`: the only pools whose results may be other objects than at the memo's
    last asking, in the same places (the caller keeps them so: a capacity probe)."""
    try:
        return _answer(
            world, workload, options, count, budget, results, cel, allocations, memo, small, changed
        )
    except Overgrown as exc:
        if memo is not None and not exc.kept:
            memo.clear()
        raise
    except BaseException:
        if memo is not None:
            memo.clear()  # half brought up to date: the next asking starts over
        raise


def _answer(
    world: World,
    workload: Workload,
    options: EngineOptions | None,
    count: int | None,
    budget: int,
    results: Sequence[PoolResult] | None,
    cel: CelEngine | None,
    allocations: Mapping[PoolKey, Sequence[AllocRef]] | None,
    memo: FitMemo | None,
    small: bool = False,
    changed: Collection[PoolKey] | None = None,
) -> FitResult:
    opts = options or EngineOptions()
    rules = rules_for(opts.profile)
    classes = {c.name: c for c in world.classes}
    check_workload(workload, classes)
    out = FitResult(workload.label, 0, 0, False, count)
    refused = _aborts(workload, rules)
    if refused is not None:
        out.stopped, out.blocker = "aborts", f"the scheduler aborts: {refused}"
        return out
    base = index_allocations(world.claims) if allocations is None else allocations
    if results is None:
        results = compute_world(world, opts, allocations=base)
    cel = _selector_cache(results, cel, memo)
    per_copy, pending, merged, first = _read(workload, rules, memo)
    # A question asked once is worked out as one asked again with nothing kept.
    kept = memo is not None and not workload.shared
    if memo is None or not kept:
        # Copies that share a claim: one group, anew. Asked by a caller that keeps no
        # memo, the results are judged with the allocations handed (the contract above).
        memo = FitMemo(cel=cel, once=True, as_judged=memo is None)
    key = (workload, opts, count, budget, tuple(world.classes), tuple(world.taint_rules), id(cel))
    q = memo.renewed(key, results, base, changed)
    if q is None:
        if small:
            raise Overgrown("asked anew")
        q = Question(world, results, base, rules, merged, first, budget, cel)
        memo.begin(key, q)
    nodes = _nodes_to_try(q, world, workload, out)
    groups = _groups(q, nodes, pending, out, memo, small)
    q.tried = nodes
    board = memo.board_for(groups, nodes)
    out.copies, out.max_copies = _capped(board.explore(q, count), count)
    out.bounded = out.max_copies is None
    _alone(q, board, count, bool(pending))
    fits = board.fits.snapshot()
    out.nodes, out.ranked = FitNodes(fits), RankedNodes(board, fits)
    if memo.reused and q.spent:
        # The budget ended: which searches it cut off depends on the order of all of
        # them, so the answer is that of a question asked anew.
        if small:
            raise Overgrown("the budget ended")
        memo.clear()
        return _answer(world, workload, opts, count, budget, results, cel, base, memo)
    out.searches = q.searches
    memo.searched = False
    _first_and_blocker(q, out, world, opts, workload, count, per_copy, pending, board, memo, small)
    if kept:
        memo.settle(q, results)
    return out


def _read(workload: Workload, rules: Rules, memo: FitMemo | None) -> ReadClaims:
    """Each copy's claims and the shared ones the first allocates, as the release reads
    them, and merged for one Allocate call; kept in the memo for the same workload and
    rules (a probe asks them at every asking)."""

    def read() -> ReadClaims:
        per_copy = tuple(as_read(_copy_claim(c, 0), rules) for c in workload.claims)
        pending = tuple(as_read(c, rules) for c in workload.shared if not c.allocated)
        merged = merge_claims(per_copy)
        first = merge_claims([*per_copy, *pending]) if pending else merged
        return per_copy, pending, merged, first

    return read() if memo is None else memo.derived("read", (workload, rules), read)


def _selector_cache(
    results: Sequence[PoolResult], cel: CelEngine | None, memo: FitMemo | None
) -> CelEngine:
    """The caller's CelEngine, else the memo's, else a new one (kept in the memo)."""
    if cel is None and memo is not None:
        cel = memo.cel
    if cel is None:
        # Every device is met several times (grouping, searches, the explanation): its
        # selector results must stay cached for the whole question.
        devices = sum(len(fs.devices) for r in results if r.prepared for fs in r.prepared.flat)
        cel = CelEngine(max_results=max(200_000, 8 * devices))
        if memo is not None:
            memo.cel = cel
    return cel


def _groups(
    q: Question,
    nodes: Sequence[NodeName],
    pending: Sequence[ResourceClaim],
    out: FitResult,
    memo: FitMemo,
    small: bool,
) -> list[tuple[NodeName, ...]]:
    """The groups of nodes explored apart (said in `out` when copies share a claim)."""
    if pending:
        # The first copy allocates the shared claims; every later copy must reach them:
        # all nodes are one group, and later copies are searched only where they reach.
        out.notes.append(
            "copies share " + ", ".join(c.name for c in pending) + ", allocated with the first copy"
        )
        return [tuple(nodes)]
    groups = memo.groups_of(q, nodes, small)
    if groups is None:
        raise Overgrown("the groups change", kept=True)
    return groups


def _alone(q: Question, board: Board, count: int | None, shared: bool) -> None:
    """What each node takes with no copy on any other (a group of its own already says
    it; `shared`: copies share a claim the first allocates, so no node is alone)."""
    if not shared:
        board.alone_reaches(q, count)
    changed = sorted(board.unfit)
    for j in changed:
        n = board.nodes[j]
        r = board.node_reach(n, shared)
        board.fits[j] = None if r is None else _node_fit(q, n, r)
    board.unfit.clear()
    _rank(board, changed)


def _rank(board: Board, changed: Sequence[int]) -> None:
    """Put the nodes whose fits changed in their places in board.ranked; every node
    when the ranks were not kept, or many changed (sorting beats that many inserts)."""
    ranked, rank_of = board.ranked, board.rank_of
    if not board.ranks_kept or 8 * len(changed) > len(board.fits):
        rank_of.clear()
        for j, f in enumerate(board.fits):
            if f is not None and takes_some(f):
                rank_of[j] = node_rank(f)
        ranked[:] = sorted((key, j) for j, key in rank_of.items())
        board.ranks_kept = True
        return
    for j in changed:
        before = rank_of.pop(j, None)
        if before is not None:
            del ranked[bisect_left(ranked, (before, j))]
        f = board.fits[j]
        if f is not None and takes_some(f):
            key = rank_of[j] = node_rank(f)
            insort(ranked, (key, j))


def _node_fit(q: Question, n: NodeName, r: Reach) -> NodeFit | None:
    low, high = bounds([r])
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


def _nodes_to_try(
    q: Question, world: World, workload: Workload, out: FitResult
) -> Sequence[NodeName]:
    """The nodes copies may go to: those some pool has a view for, and where copies
    share an allocated claim, only those that reach its devices (said in `out`)."""
    nodes: Sequence[NodeName] = q.nodes()
    if world.nodes is not None:
        # The cluster's nodes are known: no node is assumed beyond them. A node with no
        # view of any pool still gathers the pools every node does (their counter
        # slices, 1.35 and 1.36), and the attempt aborts there as anywhere: one such
        # node answers for all of them.
        known = nodes[:-1] if nodes and nodes[-1] is None else nodes  # None sorts last
        if q.index.bystanders:
            viewless = sorted({n.name for n in world.nodes} - set(known))
            known = [*known, *viewless[:1]]
        nodes = known
    pinned = [c for c in workload.shared if c.allocated]
    if pinned:
        nodes = [n for n in nodes if all(_reaches(q, n, c) for c in pinned)]
        out.notes.append(
            "copies share "
            + ", ".join(c.name for c in pinned)
            + f": only the {len(nodes)} node(s) that reach its devices are tried"
        )
    return nodes


def _reaches(q: Question, node: NodeName, claim: ResourceClaim) -> bool:
    """Whether every device of an allocated claim reaches the node."""
    wanted = {(r.driver, r.pool, r.device) for r in claim.results if not r.admin_access}
    seen = {d.id for p in q.pools(node, 0) for s in p.slices for d in s if d.reaches}
    return wanted <= seen


def _greedy(
    q: Question, nodes: Sequence[NodeName], count: int | None
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
        state = merge_state(state, pick[1])
    return path, "count"


def _first_and_blocker(
    q: Question,
    out: FitResult,
    world: World,
    opts: EngineOptions,
    workload: Workload,
    count: int | None,
    per_copy: Sequence[ResourceClaim],
    pending: Sequence[ResourceClaim],
    board: Board,
    memo: FitMemo,
    small: bool,
) -> None:
    # Groups are independent: each placed on its own ends where the copies placed in
    # turn on the first node that fits would end.
    if count is None:
        placed, first, why = _placed_standing(q, workload, board)
    else:
        placed, first, why = _placed_in_turn(q, count, board)
    if first is not None:
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
    if count is None and not board.mixed:
        refs, moved = board.placed, board
    else:
        refs, moved = _refs(q, workload, board, count), None
    out.blocked, out.blocker = _explain_next(
        q, world, opts, workload, refs, placed, moved, per_copy, pending, memo, small
    )


Picked = tuple[NodeName, tuple[Taken, ...]] | None


def _placed_standing(q: Question, workload: Workload, board: Board) -> tuple[int, Picked, str]:
    """Without a count: each group's copies placed (again where it changed) up to the
    first group whose copies end otherwise than when no node fits; the copies placed,
    the first one, and why they ended."""
    for i in sorted(board.unplaced):
        if board.odd and min(board.odd) < i:
            break  # the copies end before this group
        hit = board.placements[i].get(None) or Placement(*_greedy(q, board.groups[i], None))
        board.place(i, hit, _refs_of(q, workload.namespace, hit, first=i == 0))
    if not board.groups:
        return 0, None, UNALLOCATABLE
    stop = board.stop()
    if stop == len(board.groups) - 1:  # the copies end in no group before the last
        placed, at = board.lengths_sum, board.least_first()
    else:
        placed = sum(board.lengths[: stop + 1])
        at = board.firsts.index(min(board.firsts[: stop + 1]))
    first = None
    if board.firsts[at] != NO_FIRST:
        first = board.placements[at][None].path[0]
    return placed, first, board.placements[stop][None].why


def _placed_in_turn(q: Question, count: int, board: Board) -> tuple[int, Picked, str]:
    """With a count: each group's copies placed in turn, on top of those before."""
    placed = 0
    why = UNALLOCATABLE
    firsts: list[tuple[NodeName, tuple[Taken, ...]]] = []
    for i, group in enumerate(board.groups):
        left = count - placed
        kept = board.placements[i]
        hit = kept.get(left)
        if hit is None:
            hit = kept[left] = Placement(*_greedy(q, group, left))
        why = hit.why
        if hit.path:
            firsts.append(hit.path[0])
            placed += len(hit.path)
        if why != UNALLOCATABLE:
            break
    first = min(firsts, key=lambda p: first_key(p[0])) if firsts else None
    return placed, first, why


def _refs(
    q: Question, workload: Workload, board: Board, count: int | None
) -> dict[PoolKey, list[AllocRef]]:
    """The copies' allocations by pool, summed over every group's placement."""
    placed: dict[PoolKey, list[AllocRef]] = {}
    left = count
    for i, kept in enumerate(board.placements):
        seg = kept.get(left)
        if seg is None:
            continue
        for key, refs in _refs_of(q, workload.namespace, seg, first=i == 0).items():
            placed[key] = [*placed[key], *refs] if key in placed else refs
        if left is not None:
            left -= len(seg.path)
    return placed


def _explain_next(
    q: Question,
    world: World,
    opts: EngineOptions,
    workload: Workload,
    placed: Mapping[PoolKey, Sequence[AllocRef]],
    copies: int,
    board: Board | None,
    per_copy: Sequence[ResourceClaim],
    pending: Sequence[ResourceClaim],
    memo: FitMemo,
    small: bool,
) -> tuple[list[ClaimExplanation], str]:
    """`why` for the claims of the next copy, in the world with the `copies` placed
    (their allocations by pool: `placed`, the standing sum of `board` when given)."""
    # Only the pools the copies took devices in are judged again, with the world's
    # allocations the question indexed and the copies' added; judged to be explained,
    # never shown, so without the figures only a pool's status shows.
    opts = memo.derived("judged", (opts,), lambda: replace(opts, fragmentation=False))
    index = memo.index_after(world, opts, q.results, q.base, placed, board)
    results: list[PoolResult] | None = None
    if index is None:
        results = _judged_after(q, world, opts, placed)
        index = DeviceIndex.build(results, world.taint_rules)
    explainer = memo.explainer(q.cel)
    claims = list(
        memo.derived(
            "next", (per_copy, copies), lambda: [_copy_claim(c, copies + 1) for c in per_copy]
        )
    )
    if not copies:
        claims.extend(pending)
    # The estimate's words first (every device's reason); the search only where the
    # estimate cannot say why (a combination, a constraint): it costs a search per node.
    explained = []
    for c in claims:
        found = explainer.explain(c, index, world.classes, rules=world.taint_rules)
        if found.verdict not in ("Unallocatable", "Error"):
            memo.searched = True
            if small:
                raise Overgrown("the next copy is explained by a search on every node")
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
    q: Question, world: World, opts: EngineOptions, placed: Mapping[PoolKey, Sequence[AllocRef]]
) -> list[PoolResult]:
    """The world judged after the copies: the pools they took devices in again."""
    allocations = dict(q.base)
    for key, refs in placed.items():
        allocations[key] = [*q.base.get(key, ()), *refs]
    return compute_world(world, opts, q.results, set(placed), allocations)


def _refs_of(
    q: Question, namespace: str, hit: Placement, first: bool
) -> dict[PoolKey, list[AllocRef]]:
    """A placement's allocations by pool, worked out when first needed and kept on it."""
    if hit.refs is None:
        hit.refs = _placed(q, namespace, hit.path, first)
    return hit.refs


def _placed(q: Question, namespace: str, path: Path, first: bool) -> dict[PoolKey, list[AllocRef]]:
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


def node_rank(n: NodeFit) -> tuple[int, str]:
    """The nodes that fit more copies first, then by name (iter_nodes' order)."""
    return (-(n.max_copies or n.copies), n.name or "~")


def takes_some(n: NodeFit) -> bool:
    """A node a slice names that takes some copy on its own (FitResult.ranked)."""
    return n.name is not None and bool(n.max_copies or n.copies)


class RankedNodes(Sequence[NodeFit]):
    """FitResult.ranked: the board's ranking and fits as they were when the answer was
    made (copied whole: the board changes at the next asking), each node looked up
    only when read."""

    __slots__ = ("_fits", "_ranked")

    def __init__(self, board: Board, fits: Sequence[NodeFit | None]) -> None:
        self._ranked = list(board.ranked)
        self._fits = fits  # board.fits as they are now

    def __len__(self) -> int:
        return len(self._ranked)

    @overload
    def __getitem__(self, i: int) -> NodeFit: ...

    @overload
    def __getitem__(self, i: slice) -> list[NodeFit]: ...

    def __getitem__(self, i: int | slice) -> NodeFit | list[NodeFit]:
        fits = self._fits
        if isinstance(i, slice):
            return [cast(NodeFit, fits[j]) for _, j in self._ranked[i]]
        return cast(NodeFit, fits[self._ranked[i][1]])


class FitNodes(Sequence[NodeFit]):
    """FitResult.nodes: the board's fits as they were when the answer was made (a
    snapshot), the nodes with none left out when first read: a probe reads only the
    few ranked first."""

    __slots__ = ("_fits", "_kept")

    def __init__(self, fits: Sequence[NodeFit | None]) -> None:
        self._fits = fits
        self._kept: list[NodeFit] | None = None

    def _all(self) -> list[NodeFit]:
        if self._kept is None:
            self._kept = list(filter(None, self._fits))  # a NodeFit is true
        return self._kept

    def __len__(self) -> int:
        return len(self._all())

    @overload
    def __getitem__(self, i: int) -> NodeFit: ...

    @overload
    def __getitem__(self, i: slice) -> list[NodeFit]: ...

    def __getitem__(self, i: int | slice) -> NodeFit | list[NodeFit]:
        return self._all()[i]

    def __iter__(self) -> Iterator[NodeFit]:
        return iter(self._all())

    def __repr__(self) -> str:
        return f"FitNodes({self._all()!r})"


def iter_nodes(result: FitResult) -> Iterator[NodeFit]:
    """The nodes that fit some copy first, then the rest, each by name."""
    yield from sorted(result.nodes, key=node_rank)
