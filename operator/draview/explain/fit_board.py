"""fit's answer kept group by group (explain/fit.py): the Board.

A thousand nodes with a pool each are a thousand groups. A capacity probe asked again
after one claim changed explores one of them again; everything else it answers (the
bounds, each node's copies, the placement and the copies' allocations) is a sum over the
groups. The board keeps each group's part in lists aligned with the groups, and the
sums beside them, so that asking again patches the places of the groups that changed
instead of walking every group in Python."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from draview.engine.model import AllocRef, PoolKey
from draview.explain.chunked import Chunked
from draview.explain.fit_search import NodeName, Placement, Question, Reach, Tally, explore

if TYPE_CHECKING:
    from draview.explain.fit import NodeFit

# The sort key of a group none of whose nodes takes a copy: after every node's.
NO_FIRST = "2"
UNALLOCATABLE = "unallocatable"


def first_key(node: NodeName) -> str:
    """Nodes by name, a node no slice names (None) last: a string, which `min` and
    `index` compare in C over the thousands of groups of a large cluster."""
    return "1" if node is None else "0" + node


@dataclass(slots=True)
class Board:
    """One question's answer by group: a place per group (and per node) holding what it
    found, the sums over them, and what is to be worked out again. A new question's
    board has every place to work out; a board kept between askings (FitMemo) has the
    places of the groups that gather a pool judged again (`forget`)."""

    groups: Sequence[tuple[NodeName, ...]]
    nodes: Sequence[NodeName]
    reach: list[Reach | None]  # None: to explore
    cost: list[int]  # the node searches each group's reach cost
    group_at: dict[NodeName, int]  # a node's group, by place
    node_at: dict[NodeName, int]  # a node's place in `nodes`
    several: list[int]  # the groups of several nodes, whose nodes are explored alone
    tally: Tally | None = None
    # The reach of each node of a group of several, explored alone, and what it cost.
    alone: dict[NodeName, tuple[Reach, int]] = field(default_factory=dict)
    # By node, as `nodes`; handed out whole in each answer (a snapshot: Chunked).
    fits: Chunked[NodeFit | None] = field(default_factory=Chunked)
    unfit: set[int] = field(default_factory=set)  # nodes whose fit is to work out again
    # The groups whose reach is None, kept so that asking again need not look at every
    # group to find the few to explore.
    unexplored: set[int] = field(default_factory=set)
    # The nodes that take some copy, as (rank, place in `nodes`) in rank order
    # (fit.node_rank), and each one's rank: a probe reads the first few at each asking,
    # where sorting every node would cost more than the nodes whose fit changed.
    ranked: list[tuple[tuple[int, str], int]] = field(default_factory=list)
    rank_of: dict[int, tuple[int, str]] = field(default_factory=dict)
    ranks_kept: bool = False  # False: `ranked` is to be made from every fit
    # Each group's copies placed in turn, by copies left to place (None: no count).
    placements: list[dict[int | None, Placement]] = field(default_factory=list)
    # Without a count: each group's placement summed up, patched as groups change.
    firsts: list[str] = field(default_factory=list)  # first_key of its path
    lengths: list[int] = field(default_factory=list)
    lengths_sum: int = 0
    _least: int | None = None  # the group whose first key is least (None: to find)
    odd: set[int] = field(default_factory=set)  # ended otherwise than unallocatable
    unplaced: set[int] = field(default_factory=set)  # to place again
    placed: dict[PoolKey, list[AllocRef]] = field(default_factory=dict)  # the copies'
    placed_by: dict[PoolKey, int] = field(default_factory=dict)  # the group that placed
    moved: set[PoolKey] = field(default_factory=set)  # pools `placed` changed in
    # A pool holds the copies of two groups (groups gather pools apart, so never met):
    # `placed` cannot be patched, and the caller sums the placements itself.
    mixed: bool = False
    reused: bool = False  # some group kept its reach from the last asking

    @classmethod
    def of(
        cls,
        groups: Sequence[tuple[NodeName, ...]],
        nodes: Sequence[NodeName],
        old: Board | None = None,
    ) -> Board:
        """A board of `groups`, taking from `old` what a group with the same nodes found
        there, when it is not to be explored again."""
        n = len(groups)
        board = cls(
            groups,
            nodes,
            [None] * n,
            [0] * n,
            {node: i for i, g in enumerate(groups) for node in g},
            {node: j for j, node in enumerate(nodes)},
            [i for i, g in enumerate(groups) if len(g) > 1],
            fits=Chunked([None] * len(nodes)),
            unfit=set(range(len(nodes))),
            placements=[{} for _ in groups],
            firsts=[NO_FIRST] * n,
            lengths=[0] * n,
            unplaced=set(range(n)),
            unexplored=set(range(n)),
        )
        if old is None:
            return board
        kept = {g: i for i, g in enumerate(old.groups) if old.reach[i] is not None}
        for i, g in enumerate(groups):
            j = kept.get(g)
            if j is None:
                continue
            board.reach[i], board.cost[i] = old.reach[j], old.cost[j]
            board.unexplored.discard(i)
            board.placements[i] = old.placements[j]
            for node in g:
                if node in old.alone:
                    board.alone[node] = old.alone[node]
                k = old.node_at.get(node)
                if k is not None and k not in old.unfit:
                    board.fits[board.node_at[node]] = old.fits[k]
                    board.unfit.discard(board.node_at[node])
        return board

    def forget(self, nodes: Iterable[NodeName]) -> None:
        """The nodes gather pools judged again: their groups are explored, their nodes'
        fits worked out and their copies placed again."""
        for node in nodes:
            i = self.group_at.get(node)
            if i is None or self.reach[i] is None:
                continue
            self.reach[i] = None
            self.unexplored.add(i)
            self._unplace(i)
            self.placements[i] = {}
            self.unplaced.add(i)
            for member in self.groups[i]:
                self.alone.pop(member, None)
                self.unfit.add(self.node_at[member])

    # -- the groups' reaches -------------------------------------------------------------
    def explore(self, q: Question, count: int | None) -> tuple[int, int | None]:
        """Every group's reach, and the bounds over them (fit_search.bounds): the groups
        to explore are, in order, each with the searches of the groups before it spent
        (the budget ends where a new question's would)."""
        spent, upto = q.searches, 0
        todo = sorted(self.unexplored)
        self.reused = len(todo) < len(self.groups)
        for i in todo:
            spent += sum(self.cost[upto:i])
            q.searches = spent
            q.forget_searches(self.groups[i])
            self.reach[i] = explore(q, self.groups[i], count)
            self.unexplored.discard(i)
            self.cost[i] = q.searches - spent
            spent, upto = q.searches, i + 1
        q.searches = spent + sum(self.cost[upto:])
        reaches = cast(list[Reach], self.reach)  # every group explored now
        if self.tally is None:
            self.tally = Tally(reaches)
        else:
            for i in todo:
                self.tally.put(i, reaches[i])
        return self.tally.bounds()

    def alone_reaches(self, q: Question, count: int | None) -> None:
        """Each node of a group of several explored on its own, in order."""
        for i in self.several:
            for node in self.groups[i]:
                hit = self.alone.get(node)
                if hit is not None:
                    self.reused = True
                    q.searches += hit[1]
                    continue
                before = q.searches
                self.alone[node] = (explore(q, [node], count), q.searches - before)

    def node_reach(self, node: NodeName, shared: bool) -> Reach | None:
        """What the node takes alone: its group's reach when it is a group of its own;
        None when copies share a claim (no node is alone) and the group has others."""
        i = self.group_at[node]
        if len(self.groups[i]) == 1:
            return self.reach[i]
        if shared:
            return None
        return self.alone[node][0]

    # -- placing the copies without a count ------------------------------------------------
    def place(self, i: int, placement: Placement, refs: dict[PoolKey, list[AllocRef]]) -> None:
        """Group i's copies are placed as `placement` now, taking `refs`."""
        self._unplace(i)
        self.placements[i][None] = placement
        self.unplaced.discard(i)
        self.lengths_sum += len(placement.path) - self.lengths[i]
        self.lengths[i] = len(placement.path)
        old, new = self.firsts[i], first_key(placement.path[0][0]) if placement.path else NO_FIRST
        least = self._least
        if least == i:
            if new > old:
                self._least = None  # another group's may be less now
        elif least is not None:
            held = self.firsts[least]
            if new < held or (new == held and i < least):
                self._least = i
        self.firsts[i] = new
        if placement.why == UNALLOCATABLE:
            self.odd.discard(i)
        else:
            self.odd.add(i)
        placement.refs = refs
        for key, mine in refs.items():
            if self.placed_by.setdefault(key, i) != i:
                self.mixed = True
            self.placed[key] = mine
            self.moved.add(key)

    def least_first(self) -> int:
        """The group whose placement's first copy comes first (first_key; the first
        group of those that place none when none does), kept as groups are placed: a
        probe reads it at each asking."""
        if self._least is None:
            self._least = self.firsts.index(min(self.firsts))
        return self._least

    def _unplace(self, i: int) -> None:
        """Take group i's copies out of `placed`."""
        before = self.placements[i].get(None)
        if before is None or before.refs is None:
            return
        for key in before.refs:
            if self.placed_by.get(key) == i:
                del self.placed[key], self.placed_by[key]
                self.moved.add(key)

    def stop(self) -> int:
        """The last group the copies are placed in: the first whose copies ended
        otherwise than when no node fits (it ends them all), else the last."""
        return min(self.odd) if self.odd else len(self.groups) - 1
