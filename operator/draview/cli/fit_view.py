"""`kubectl dra fit` and `draview analyze --fit`: read a workload, ask explain/fit.py,
print the answer (a table, wide, or the documented JSON/YAML schema, docs/fit.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from draview.api.workload import Lookup, Workload, WorkloadError, read_workload
from draview.api.world import World, build_world
from draview.cli.dra.render import Doc
from draview.cli.inputs import InputError, read_sources
from draview.cli.limits import limits_from_args
from draview.cli.output import dump
from draview.cli.tables import render_table
from draview.engine.model import EngineOptions
from draview.engine.pool import PoolResult
from draview.engine.profile import Profile
from draview.engine.world import node_assumption
from draview.explain.fit import FIT_BUDGET, FitDevice, FitError, FitResult, fit, iter_nodes
from draview.explain.fit_document import ONLY_DRA, document, node_name


def add_fit_flags(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument(
        "--count",
        type=int,
        metavar="N",
        help="stop once N copies fit (default: search to the maximum)",
    )
    p.add_argument(
        "--budget",
        type=int,
        default=FIT_BUDGET,
        metavar="SEARCHES",
        help=f"node searches (one Allocate call each) to spend at most (default {FIT_BUDGET}); "
        "when they run out the answer is a lower bound ('at least', bounded: true)",
    )


def check_flags(args: argparse.Namespace) -> str | None:
    """What is wrong with --count and --budget, if anything."""
    if args.count is not None and args.count < 1:
        return "--count must be at least 1"
    if args.budget < 1:
        return "--budget must be at least 1"
    return None


def read_workload_file(
    path: str, args: argparse.Namespace, lookup: Lookup, namespace: str
) -> tuple[Workload, list[dict[str, Any]]]:
    """The workload of `path` (- for stdin), and the objects the file holds. InputError
    for a file that cannot be read, WorkloadError for one that holds no workload draview
    can judge."""
    objects = read_sources([path], limits_from_args(args))
    return read_workload(objects, lookup, namespace), objects


def answer(
    world: World,
    workload: Workload,
    profile: Profile,
    args: argparse.Namespace,
    results: Sequence[PoolResult] | None = None,
) -> FitResult:
    return fit(
        world, workload, EngineOptions(profile=profile), args.count, args.budget, results=results
    )


def copies_text(result: FitResult) -> str:
    if result.bounded:
        return f"at least {result.copies} (the search budget ended first)"
    if result.placement_dependent:
        return (
            f"{result.copies} to {result.max_copies} (the nodes the scheduler picks decide: "
            f"at least {result.copies} whatever it picks)"
        )
    return f"{result.copies}" + (" (--count reached)" if result.stopped == "count" else "")


def _node_copies(copies: int, most: int | None) -> str:
    if most is None:
        return f">={copies}"
    return str(copies) if most == copies else f"{copies}-{most}"


def _devices_text(devices: Sequence[FitDevice], several_claims: bool) -> str:
    return ", ".join(
        (f"{d.claim}/" if several_claims else "") + f"{d.request}={d.driver}/{d.pool}/{d.device}"
        for d in devices
    )


def render(result: FitResult, workload: Workload, profile: str, wide: bool) -> str:
    several = len(workload.claims) + len(workload.shared) > 1
    doc = Doc()
    pairs: list[tuple[str, object]] = [
        ("Workload", f"{workload.label} in {workload.namespace}"),
        ("Claims Per Copy", ", ".join(c.name for c in workload.claims)),
    ]
    if workload.shared:
        pairs.append(("Shared Claims", ", ".join(c.name for c in workload.shared)))
    pairs += [
        ("Profile", profile),
        ("Judged", ONLY_DRA),
        ("Copies", copies_text(result)),
    ]
    if result.first:
        pairs.append(
            (
                "First Copy",
                f"{node_name(result.first_node)}: {_devices_text(result.first, several)}",
            )
        )
    pairs.append(("Next Copy", result.blocker))
    doc.block(0, pairs)
    for note in result.notes:
        doc.line(0, f"Note: {note}")
    text = doc.text()
    rows: list[list[object]] = []
    for n in iter_nodes(result):
        if not wide and not (n.max_copies or n.copies or n.error):
            continue
        row: list[object] = [node_name(n.name), _node_copies(n.copies, n.max_copies)]
        devices = _devices_text(n.devices, several)
        if n.devices_vary:
            devices += " (or others: the walk order decides)"
        row.append(devices)
        if wide:
            row.append(n.error)
        rows.append(row)
    headers = ["NODE", "COPIES", "FIRST COPY DEVICES"] + (["ERROR"] if wide else [])
    if rows:
        text += "\n" + render_table(headers, rows)
    else:
        text += "\nNo node takes a copy.\n"
    if wide and result.blocked:
        detail = Doc()
        detail.head(0, "Why The Next Copy Does Not Fit")
        for e in result.blocked:
            detail.head(1, f"{e.name} ({e.verdict})")
            for r in e.requests:
                for c in r.choices:
                    detail.block(2, [(c.request, c.reason)])
            for problem in e.constraint_problems:
                detail.line(2, f"- {problem}")
        text += "\n" + detail.text()
    return text


def output(
    result: FitResult, workload: Workload, profile: str, fmt: str | None, budget: int
) -> str:
    """`profile`: the label of the profile the answer was judged as."""
    if fmt in ("yaml", "json"):
        return dump(document(result, workload, profile, budget), fmt)
    return render(result, workload, profile, fmt == "wide")


__all__ = [
    "FitError",
    "InputError",
    "WorkloadError",
    "add_fit_flags",
    "answer",
    "check_flags",
    "document",
    "output",
    "read_workload_file",
    "run_offline",
]


def run_offline(args: argparse.Namespace, profile: Profile, prog: str = "draview analyze") -> int:
    """`draview analyze --fit FILE DUMP…`: the answer for a dump; bad input is one line
    and exit 2."""
    problem = check_flags(args)
    if problem is not None:
        print(f"{prog}: {problem}", file=sys.stderr)
        return 2
    if args.fit == "-" and "-" in args.files:
        print(f"{prog}: the workload and the dump cannot both be read from stdin", file=sys.stderr)
        return 2
    try:
        objects = read_sources(args.files, limits_from_args(args))
    except InputError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2

    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        for o in objects:
            meta = o.get("metadata")
            if o.get("kind") != kind or not isinstance(meta, dict):
                continue
            if meta.get("name") == name and (meta.get("namespace") or "default") == namespace:
                return o
        return None

    try:
        workload, _ = read_workload_file(args.fit, args, lookup, "default")
        world = build_world(objects)
        for warning in dict.fromkeys(str(p) for p in world.problems):
            print(f"{prog}: warning: {warning}", file=sys.stderr)
        if (note := node_assumption(world)) is not None:
            print(f"{prog}: note: {note}", file=sys.stderr)
        result = answer(world, workload, profile, args)
    except (InputError, WorkloadError, FitError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    fmt = {"table": None}.get(args.output, args.output)
    sys.stdout.write(output(result, workload, profile.label(), fmt, args.budget))
    return 0
