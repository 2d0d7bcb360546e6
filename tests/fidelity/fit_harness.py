"""`fit` side by side with the real allocator placing copies one after another (the
oracle's fit mode, e2e/oracle/fit.go).

The oracle plays out each node alone and the whole cluster under several placement
policies; draview's answer is a range where placement (or 1.34's and 1.35's walk order)
decides. Each node's count must lie in draview's range for that node (and equal it where
draview says it does not vary), the first copy's devices must be draview's where draview
says they do not vary, and every policy's total must lie in draview's range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from draview.api.claims import ResourceClaim
from draview.api.workload import Workload
from draview.api.world import build_world
from draview.engine.model import EngineOptions
from draview.engine.profile import Profile
from draview.explain.fit import FIT_BUDGET, FitError, FitResult, fit

__all__ = ["BUDGET", "COUNT", "compare_fit", "fit", "fit_case", "workload_of", "workloads"]

POLICIES = ("first", "last", "spread", "random-1", "random-2")
# Copies asked at most: enough to use up the small worlds' pools, few enough for CI.
COUNT = 8
BUDGET = FIT_BUDGET  # as the CLI spends by default


def fit_case(
    case_id: str,
    objects: Sequence[dict[str, Any]],
    claims: Sequence[dict[str, Any]],
    count: int = COUNT,
) -> dict[str, Any]:
    return {
        "id": case_id,
        "objects": list(objects),
        "fit": {"claims": list(claims), "count": count, "policies": list(POLICIES)},
    }


@dataclass(frozen=True, slots=True)
class Checked:
    differences: list[str]
    undecided: int  # draview's budget ended first: its numbers were checked as lower bounds
    copies: int  # copies the oracle placed, over its runs (to show something was judged)
    ranges: int  # answers where draview said placement decides


def workload_of(claims: Sequence[dict[str, Any]]) -> Workload:
    models = tuple(ResourceClaim.from_object(c) for c in claims)
    return Workload("Pod", "fit", models[0].namespace or "default", models)


def _in(value: int, low: int, high: int | None) -> bool:
    return low <= value and (high is None or value <= high)


def compare_fit(
    objects: Sequence[dict[str, Any]],
    claims: Sequence[dict[str, Any]],
    answer: dict[str, Any],
    profile: Profile | None = None,
    count: int = COUNT,
    known: FitResult | None = None,
) -> Checked:
    """`known`: draview's answer, when the caller has it already."""
    if "error" in answer:
        raise RuntimeError(f"oracle refused the world: {answer['error']}")
    world = build_world(objects)
    options = EngineOptions() if profile is None else EngineOptions(profile=profile)
    workload = workload_of(claims)
    placed = sum(r["copies"] for r in (*answer["nodes"].values(), *answer["policies"].values()))
    try:
        mine: FitResult | None = known or fit(world, workload, options, count=count, budget=BUDGET)
    except FitError as exc:
        # An unknown class: the allocator fails every attempt.
        wrong = [
            f"{where}: draview refuses ({exc}), allocator placed {r['copies']}"
            for where, r in (*answer["nodes"].items(), *answer["policies"].items())
            if r["copies"]
        ]
        return Checked(wrong, 0, placed, 0)
    assert mine is not None
    diffs: list[str] = []
    # With the budget spent, draview's numbers are lower bounds (max None): still checked.
    index = {c.name: i for i, c in enumerate(workload.claims)}
    nodes = {n.name: n for n in mine.nodes}
    for name, run in answer["nodes"].items():
        node = nodes.get(name)
        low, high = (node.copies, node.max_copies) if node else (0, 0)
        if not _in(run["copies"], low, high):
            diffs.append(
                f"node {name} alone: draview {low}..{high}, allocator {run['copies']} "
                f"({run['stopped'][:160]})"
            )
            continue
        unexplored = node is not None and node.bounded and not node.devices
        if (
            node is None
            or node.devices_vary
            or unexplored
            or not run["copies"]
            or not run.get("first")
        ):
            continue
        theirs = sorted(
            (ci, d["request"], d["driver"], d["pool"], d["device"])
            for ci, devices in enumerate(run["first"])
            for d in devices
        )
        ours = sorted((index[d.claim], d.request, d.driver, d.pool, d.device) for d in node.devices)
        if theirs != ours:
            diffs.append(f"node {name}: first copy: draview {ours}, allocator {theirs}")
    for policy, run in answer["policies"].items():
        if not _in(run["copies"], mine.copies, mine.max_copies):
            diffs.append(
                f"policy {policy}: draview {mine.copies}..{mine.max_copies} "
                f"({mine.stopped}: {mine.blocker[:160]}), allocator {run['copies']} "
                f"on {run.get('nodes')} ({run['stopped'][:160]})"
            )
    return Checked(diffs, int(mine.bounded), placed, int(mine.placement_dependent))


def workloads(pending: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each pending claim alone, and consecutive pairs as the claims of one Pod."""
    singles = [[c] for c in pending]
    pairs = [[a, b] for a, b in zip(pending[::2], pending[1::2], strict=False)]
    return singles + pairs[:3]
