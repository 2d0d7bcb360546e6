"""Keeping `fit`'s question between askings of one workload (a capacity probe,
controller/capacity.py): FitMemo."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

from draview.api.world import World
from draview.cel import CelEngine
from draview.engine.judged import JudgedDevices, as_judged, device_statuses
from draview.engine.model import AllocRef, EngineOptions, PoolKey
from draview.engine.pool import PoolResult
from draview.engine.rules import rules_for
from draview.explain.fit_board import Board
from draview.explain.fit_search import NodeName, Question, node_groups
from draview.explain.index import DeviceIndex, PoolDevices, index_judged, index_pool
from draview.explain.why import Explainer

T = TypeVar("T")


@dataclass(slots=True)
class FitMemo:
    """What asking one workload leaves for asking it again after some pools were judged
    again: the question (which nodes gather which pools, and which of them count), the
    board (each group's reach and placement, each node's own answer: fit_board.py), and
    per pool its index after the copies and the next copy's explanation of it
    (why.Explainer keep_folds).

    Everything kept is keyed by the PoolResult objects it came from: the caller hands
    the same object for a pool not judged again and a new one for a pool that was. Then
    only the nodes that gather such a pool are searched again, only the pools the copies
    moved in are judged again, and only those are explained again; the answer is the
    one a new question gives (tests/fidelity/test_fit_memo.py).

    It holds about 0.7 KiB a device of the pools asked about, mostly the index and the
    explanation's device lists, and the results it was handed (bench/engine/README.md);
    of the searches it keeps, per node, the outcomes one search gave and how far its walk
    went: asked again after a claim change, a node searches again only from the first
    device the change may answer differently (explain/fit_cut.py)."""

    key: object = None
    question: Question | None = None
    board: Board | None = None
    # per pool: the result and the copies' allocations it was indexed after, and the
    # judgement indexed (None: the result's own)
    indexed: dict[
        PoolKey,
        tuple[PoolResult, Sequence[AllocRef] | None, PoolDevices, JudgedDevices | None],
    ] = field(default_factory=dict)
    # The index after the copies, the board whose copies it holds, and the pools judged
    # again since it was made.
    index: DeviceIndex | None = None
    indexed_with: Board | None = None
    stale: set[PoolKey] = field(default_factory=set)
    _explainer: Explainer | None = None
    # The selector results fit caches when the caller hands it no CelEngine; kept when
    # the memo is cleared (they hold for any pools).
    cel: CelEngine | None = None
    nodes: Sequence[NodeName] | None = None  # tried at the last asking
    groups: list[tuple[NodeName, ...]] | None = None  # of those nodes
    gone: bool = False  # some pool asked about last time is not now
    once: bool = False  # asked once (fit without a memo): nothing kept is read again
    # The results are judged with the allocations handed (fit's contract, which a probe
    # does not keep: it reads a pool's allocations after the batch that judged it), so a
    # pool the copies took devices in is judged again from its own judgement.
    as_judged: bool = False
    # What fit works out of the workload at every asking (`derived`), with what it was
    # worked out of; kept when the memo is cleared, as `cel`.
    _derived: dict[str, tuple[tuple[object, ...], object]] = field(default_factory=dict)
    # The next copy's explanation searched every node at the last asking (fit's
    # _explain_next): an asking again would too (`small`).
    searched: bool = False
    regroup: bool = False  # the groups are to be made again (groups_of)

    @property
    def reused(self) -> bool:
        """This asking took some group's reach from an earlier one."""
        return self.board is not None and self.board.reused

    def derived(self, tag: str, of: tuple[object, ...], make: Callable[[], T]) -> T:
        """make(), kept while `of` is the same (the same objects, compared in C before
        their values): what a probe works out of its workload and options at every
        asking, the claims as read and copied, cost more than a touched pool's fold."""
        hit = self._derived.get(tag)
        if hit is not None and hit[0] == of:
            return cast(T, hit[1])
        value = make()
        self._derived[tag] = (of, value)
        return value

    def clear(self) -> None:
        self.indexed.clear()
        self.stale.clear()
        self.key, self.question, self._explainer = None, None, None
        self.board = self.index = self.indexed_with = None
        self.nodes = self.groups = None
        self.gone = self.searched = self.regroup = False

    def begin(self, key: object, question: Question) -> None:
        self.clear()
        self.key, self.question = key, question

    def renewed(
        self,
        key: object,
        results: Sequence[PoolResult],
        base: Mapping[PoolKey, Sequence[AllocRef]],
        hint: Collection[PoolKey] | None = None,
    ) -> Question | None:
        """The question kept, brought up to `results` (`hint`: Question.renew's); None
        when it must start over."""
        if self.board is not None:
            self.board.reused = False
        q = self.question
        if q is None or key != self.key:
            return None
        affected = q.renew(results, base, hint)
        if affected is None:
            return None
        if self.board is not None:
            self.board.forget(affected)
        self.stale |= q.changed
        # Until settled: an asking that stopped short (Overgrown) is asked again.
        self.gone = self.gone or any(k not in q.by_key for k in q.changed)
        return q

    def small(self, changed: Collection[PoolKey], limit: int) -> bool:
        """Whether asking again after the pools `changed` were judged again, their
        slices the same (only what they hold differs), stays small: the question kept,
        at most `limit` nodes searched again, the groups the same, the budget far from
        its end, and the next copy explained without a search on every node. Then fit's
        `small` raises Overgrown only where this cannot see ahead."""
        q, board = self.question, self.board
        if q is None or board is None or self.searched or 2 * q.searches > q.budget:
            return False
        nodes: set[NodeName] = set()
        for key in changed:
            if key not in q.by_key or key in q.shaky or key in q.index.bystanders:
                return False
            nodes.update(q.index.nodes_of(key))
            if len(nodes) > limit:
                return False
        return True

    def board_for(self, groups: Sequence[tuple[NodeName, ...]], nodes: Sequence[NodeName]) -> Board:
        """The board of these groups: the last asking's when they are the same."""
        if self.board is None or self.board.groups is not groups:
            self.board = Board.of(groups, nodes, self.board)
        return self.board

    def index_after(
        self,
        world: World,
        opts: EngineOptions,
        results: Sequence[PoolResult],
        base: Mapping[PoolKey, Sequence[AllocRef]],
        placed: Mapping[PoolKey, Sequence[AllocRef]],
        board: Board | None = None,
    ) -> DeviceIndex | None:
        """The index of the world after the copies, each pool indexed again only when
        it or its copies differ from the last asking's; None for a profile that judges
        pools with the world (1.34: an invalid pool changes the others). `board`: the
        board `placed` is of; when it is the one the last index was made with, only the
        pools judged again or that its copies moved in are looked at."""
        if not rules_for(opts.profile).invalid_pool_is_node_local:
            return None
        index, q = self.index, self.question
        if (
            index is not None
            and board is not None
            and board is self.indexed_with
            and q is not None
            and q.results is results
        ):
            for key in self.stale | board.moved:
                r = q.by_key.get(key)
                if r is None or key not in index.pools:
                    break  # a pool came: indexed in the pools' order below
                self._index(index, r, world, opts, base, placed.get(key))
            else:
                self.stale.clear()
                board.moved.clear()
                return index
        index = DeviceIndex()
        for r in results:
            self._index(index, r, world, opts, base, placed.get(r.key))
        self.index, self.indexed_with = index, board
        self.stale.clear()
        if board is not None:
            board.moved.clear()
        return index

    def _index(
        self,
        index: DeviceIndex,
        r: PoolResult,
        world: World,
        opts: EngineOptions,
        base: Mapping[PoolKey, Sequence[AllocRef]],
        refs: Sequence[AllocRef] | None,
    ) -> None:
        """Put the pool after the copies in the index, judged and indexed again only when
        it or its copies changed."""
        hit = self.indexed.get(r.key)
        if hit is None or hit[0] is not r or not (hit[1] is refs or hit[1] == refs):
            judged = None
            if refs is None or r.prepared is None:
                devices = index_pool(r, world.taint_rules)
            else:
                # From the last judgement of the same slices: only the devices whose
                # holders or counters differ are judged and indexed again.
                before = hit[3] if hit is not None else None
                if before is None and self.as_judged:
                    before = as_judged(r, base.get(r.key, ()), world.taint_rules, opts)
                allocations = [*base.get(r.key, ()), *refs]
                judged = device_statuses(
                    r.key, r.prepared, allocations, world.taint_rules, opts, before
                )
                last = hit[2] if hit is not None and before is not None else None
                devices = index_judged(r, judged, world.taint_rules, last)
            hit = self.indexed[r.key] = (r, refs, devices, judged)
        index.add(r, hit[2])

    def groups_of(
        self, q: Question, nodes: Sequence[NodeName], small: bool = False
    ) -> list[tuple[NodeName, ...]] | None:
        """node_groups, or the groups of the last asking when the nodes are the same and no
        node gathering a pool judged again now finds other relevant pools; `small`: None
        rather than make them again (a pass over every node), which the next asking
        does."""
        same = (
            not self.regroup
            and self.groups is not None
            and (self.nodes is nodes or self.nodes == nodes)
        )
        if same and all(q.relevant(n) == old for n, old in q.relevant_before.items()):
            assert self.groups is not None
            return self.groups
        if small:
            # Asked again, the pools judged since are no longer told apart: made then.
            self.regroup = True
            return None
        self.regroup = False
        self.nodes, self.groups = nodes, [tuple(g) for g in node_groups(q, nodes)]
        return self.groups

    def explainer(self, cel: CelEngine) -> Explainer:
        if self._explainer is None or self._explainer.cel is not cel:
            self._explainer = Explainer(cel, keep_folds=True, read_back=not self.once)
        return self._explainer

    def settle(self, q: Question, results: Sequence[PoolResult]) -> None:
        """After an asking: keep what holds for the next, or nothing when the budget
        ended (what it cut off is no answer to keep)."""
        if q.spent:
            self.clear()
            return
        if self.gone:
            self.prune(results)
            self.gone = False
        q.shed()

    def prune(self, results: Sequence[PoolResult]) -> None:
        """Forget the pools no longer judged."""
        keys = {r.key for r in results}
        for gone in [k for k in self.indexed if k not in keys]:
            del self.indexed[gone]
        if self._explainer is not None:
            self._explainer.prune_folds(keys)
