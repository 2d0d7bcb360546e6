"""Whether the scheduler's allocator can allocate a claim somewhere: the search of
explain/search.py run on every node, as the scheduler's Filter runs it.

One node's error that is not "not on this node" aborts the whole attempt, so it decides
the answer; otherwise one node with a solution is enough.
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
from draview.explain.gather import Assignment, GatherIndex, ambiguous, node_pools
from draview.explain.search import BudgetExceeded, NodeSearch, SearchError
from draview.explain.steps import Steps, finish

MAX_COMBINATIONS = 256  # assignments of trusted counts, combined across pools


@dataclass(frozen=True, slots=True)
class Allocatability:
    # "yes", "no", "maybe" (depends on the order the scheduler lists slices), "unknown"
    # (the search ran out of steps)
    answer: str
    detail: str = ""
    nodes: tuple[str, ...] = ()  # where it fits


def _once(
    claim: ResourceClaim,
    index: GatherIndex,
    classes: Mapping[str, DeviceClass],
    rules: Sequence[DeviceTaintRule],
    nodes: Sequence[str | None],
    cel: CelEngine,
    which: Mapping[tuple[str, str], Assignment],
    budget: int,
    profile_rules: Rules = DEFAULT_RULES,
) -> Steps[Allocatability]:
    fits: list[str] = []
    unknown = False
    for node in nodes:
        yield  # one node's search between two steps
        # One budget for the whole question: a search that explodes on one node must not
        # be allowed to do so on every other node too.
        pools = node_pools(node, index, rules, which, profile_rules.binding_pools_last)
        search = NodeSearch(claim, classes, pools, cel, budget, profile_rules)
        try:
            outcome = search.run()
            budget = search.budget
        except SearchError as exc:
            return Allocatability("no", f"the scheduler aborts: {exc}")
        except BudgetExceeded:
            unknown = True
            break
        if outcome == "ok":
            fits.append(node or "any node")
    if unknown:
        # Even with a fit somewhere, a node not searched could abort the attempt.
        return Allocatability("unknown", "the search for a solution was cut short")
    if fits:
        return Allocatability("yes", nodes=tuple(fits))
    return Allocatability("no", "no node has devices that satisfy every request")


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
        return Allocatability("no", f"the scheduler aborts: {refused}")
    if not profile_rules.taint_rules:
        rules = ()
    claim = as_read(claim, profile_rules)
    cel = cel or CelEngine()
    if gather is None or shaky is None:
        listed = list(results)
        gather, shaky = GatherIndex.build(listed), ambiguous(listed)
    tried = list(nodes) if nodes is not None else gather.nodes()
    # Where slices disagree on resourceSliceCount the scheduler's list order picks the
    # count; every combination is tried (two counts per pool, so a handful at most).
    pools = dict(shaky)
    answers: list[Allocatability] = []
    # Pools are gathered apart, so any assignment of one combines with any of another.
    for combo in islice(product(*pools.values()), MAX_COMBINATIONS):
        answer = yield from _once(
            claim,
            gather,
            classes,
            rules,
            tried,
            cel,
            dict(zip(pools, combo, strict=True)),
            budget,
            profile_rules,
        )
        answers.append(answer)
    kinds = {a.answer for a in answers}
    if len(kinds) == 1 or "unknown" in kinds:
        return answers[0] if len(kinds) == 1 else Allocatability("unknown", answers[0].detail)
    return Allocatability(
        "maybe",
        "slices of a pool disagree on resourceSliceCount: the answer depends on which "
        "one the scheduler lists first",
    )
