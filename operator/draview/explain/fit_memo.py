"""Keeping `fit`'s question between askings of one workload (a capacity probe,
controller/capacity.py): FitMemo."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from draview.api.world import World
from draview.cel import CelEngine
from draview.engine.model import AllocRef, EngineOptions, PoolKey
from draview.engine.pool import PoolResult
from draview.engine.rules import rules_for
from draview.engine.world import judge_again
from draview.explain.fit_search import (
    NodeName,
    Placement,
    Question,
    Reach,
    explore,
    node_groups,
)
from draview.explain.index import DeviceIndex, PoolDevices, index_pool
from draview.explain.why import Explainer

if TYPE_CHECKING:
    from draview.explain.fit import NodeFit


@dataclass(slots=True)
class FitMemo:
    """What asking one workload leaves for asking it again after some pools were judged
    again: the question (which nodes gather which pools, and which of them count), each
    group's reach and placement, each node's own answer, and per pool its index after
    the copies and the next copy's explanation of it (why.Explainer keep_folds).

    Everything kept is keyed by the PoolResult objects it came from: the caller hands
    the same object for a pool not judged again and a new one for a pool that was. Then
    only the nodes that gather such a pool are searched again, only the pools the copies
    moved in are judged again, and only those are explained again; the answer is the
    one a new question gives (tests/fidelity/test_fit_memo.py).

    It holds about 0.7 KiB a device of the pools asked about, mostly the index and the
    explanation's device lists, and the results it was handed (bench/engine/README.md);
    searches are dropped after each asking (Question.shed), since only one asking
    reuses them."""

    key: object = None
    question: Question | None = None
    reaches: dict[tuple[NodeName, ...], tuple[Reach, int]] = field(default_factory=dict)
    alone: dict[NodeName, tuple[Reach, int]] = field(default_factory=dict)
    node_fits: dict[NodeName, NodeFit | None] = field(default_factory=dict)
    # per group, per copies left to place (count): its placement
    greedy: dict[tuple[NodeName, ...], dict[int | None, Placement]] = field(default_factory=dict)
    group_of: dict[NodeName, tuple[NodeName, ...]] = field(default_factory=dict)
    # per pool: the result and the copies' allocations it was indexed after
    indexed: dict[PoolKey, tuple[PoolResult, Sequence[AllocRef] | None, PoolDevices]] = field(
        default_factory=dict
    )
    _explainer: Explainer | None = None
    # The selector results fit caches when the caller hands it no CelEngine; kept when
    # the memo is cleared (they hold for any pools).
    cel: CelEngine | None = None
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

    def begin(self, key: object, question: Question) -> None:
        self.clear()
        self.key, self.question = key, question

    def renewed(
        self, key: object, results: Sequence[PoolResult], base: Mapping[PoolKey, Sequence[AllocRef]]
    ) -> Question | None:
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

    def keep_group(self, group: tuple[NodeName, ...], reach: Reach, cost: int) -> None:
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

    def groups_of(self, q: Question, nodes: list[NodeName]) -> list[tuple[NodeName, ...]]:
        """node_groups, or the groups of the last asking when the nodes are the same and no
        node gathering a pool judged again now finds other relevant pools."""
        same = self.groups is not None and self.nodes == nodes
        if same and all(q.relevant(n) == old for n, old in q.relevant_before.items()):
            assert self.groups is not None
            return self.groups
        self.nodes, self.groups = nodes, [tuple(g) for g in node_groups(q, nodes)]
        return self.groups

    def explainer(self, cel: CelEngine) -> Explainer:
        if self._explainer is None or self._explainer.cel is not cel:
            self._explainer = Explainer(cel, keep_folds=True)
        return self._explainer

    def settle(self, q: Question, results: Sequence[PoolResult]) -> None:
        """After an asking: keep what holds for the next, or nothing when the budget
        ended (what it cut off is no answer to keep)."""
        if q.spent:
            self.clear()
            return
        self.prune(results)
        q.shed()

    def prune(self, results: Sequence[PoolResult]) -> None:
        """Forget the pools no longer judged."""
        keys = {r.key for r in results}
        for gone in [k for k in self.indexed if k not in keys]:
            del self.indexed[gone]
        if self._explainer is not None:
            self._explainer.prune_folds(keys)


def group_reach(
    q: Question, group: Sequence[NodeName], count: int | None, memo: FitMemo | None
) -> Reach:
    """explore of the group, or what it found when the question was last asked, if no
    node of the group gathers a pool judged again since (the searches it cost counted
    again, as a new question would spend them)."""
    if memo is None:
        return explore(q, group, count)
    key = tuple(group)
    hit = memo.reaches.get(key)
    if hit is not None:
        memo.reused = True
        q.searches += hit[1]
        return hit[0]
    memo.drop_group(key)
    q.forget_searches(group)
    before = q.searches
    reach = explore(q, group, count)
    memo.keep_group(key, reach, q.searches - before)
    return reach
