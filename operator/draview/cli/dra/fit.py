"""`kubectl dra fit WORKLOAD`: how many copies of a workload fit, where, and what blocks
the next one (docs/fit.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from draview.api.explanations import MAX_FIT_BUDGET
from draview.api.workload import Workload
from draview.cli.dra.allocations import OPERATOR
from draview.cli.dra.cluster import NotFound
from draview.cli.dra.common import CliError, UsageError
from draview.cli.dra.operator_answer import FitAnswer, Invalid, ask_fit, other_profile
from draview.cli.dra.source import Source, note
from draview.cli.fit_view import (
    InputError,
    WorkloadError,
    add_fit_flags,
    answer,
    check_flags,
    output,
    read_workload_file,
)
from draview.cli.output import dump
from draview.explain.fit import FitError
from draview.explain.fit_document import result_of


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "fit",
        parents=[common],
        help="how many copies of a claim, template or Pod fit, where, and what blocks the next",
        description="Place copies of WORKLOAD (a ResourceClaim, ResourceClaimTemplate, or a "
        "Pod, Deployment, StatefulSet, Job... whose spec.resourceClaims name templates and "
        "claims) one after another as the scheduler's allocator would, each on top of the "
        "copies before, a Pod's claims on one node. Only DRA is judged. Templates and "
        "claims the file does not hold are read from the cluster (or the -f dump). On a "
        "live cluster the draview operator's leader answers where its explain API is "
        "installed (stderr says so; --live computes the answer here).",
    )
    p.add_argument("workload", metavar="WORKLOAD", help="a file; - reads stdin")
    add_fit_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace, source: Source) -> int:
    problem = check_flags(args)
    if problem is not None:
        raise UsageError(problem)
    if args.workload == "-" and "-" in (args.filename or []):
        raise UsageError("the workload and the dump cannot both be read from stdin")
    namespace = args.namespace or source.default_namespace()
    named: list[dict[str, Any]] = []  # what the workload names, as read from the cluster

    def lookup(kind: str, ns: str, name: str) -> dict[str, Any] | None:
        try:
            found = source.one(kind, name, ns)
        except NotFound:
            return None
        named.append(found)
        return found

    try:
        workload, objects = read_workload_file(args.workload, args, lookup, namespace)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    except WorkloadError as exc:
        if exc.missing:
            raise CliError(str(exc)) from None  # kubectl's exit code for a missing object
        raise UsageError(str(exc)) from None
    if _operator_answered(source, namespace, [*objects, *named], workload, args):
        return 0
    world, results, origin = source.judged_world()
    if origin == OPERATOR:
        note(f"allocations as recorded in {origin} (--live reads every claim)")
    try:
        result = answer(world, workload, source.profile(), args, results)
    except FitError as exc:
        raise UsageError(str(exc)) from None
    profile = source.profile().label()
    sys.stdout.write(output(result, workload, profile, args.output, args.budget))
    return 0


def _operator_answered(
    source: Source,
    namespace: str,
    objects: list[dict[str, Any]],
    workload: Workload,
    args: argparse.Namespace,
) -> bool:
    """Whether the operator's leader answered (printed); else the plugin computes the
    answer, and stderr says why the operator did not (when it is there to ask)."""
    if source.cluster is None or source.live:
        return False
    if args.budget > MAX_FIT_BUDGET:
        note(
            f"--budget is above the {MAX_FIT_BUDGET:,} node searches the draview operator "
            "spends on a review: computing the answer here"
        )
        return False
    asked = ask_fit(source.cluster, namespace, objects, args.count, args.budget)
    if isinstance(asked, Invalid):
        raise UsageError(asked.message)  # as computing it here would say
    if isinstance(asked, FitAnswer):
        differs = other_profile(asked.profile, source.named_profile())
        if differs is None:
            note(asked.source)
            sys.stdout.write(_answered(asked, workload, args))
            return True
        asked = differs
    if asked is not None:
        note(f"the draview operator did not answer ({asked}); computing the answer here")
    return False


def _answered(asked: FitAnswer, workload: Workload, args: argparse.Namespace) -> str:
    """The operator's answer printed as a computed one is: the document as sent, or
    rendered from it."""
    if args.output in ("yaml", "json"):
        return dump(asked.document, args.output)
    try:
        result = result_of(asked.document)
    except ValueError as exc:
        raise CliError(f"the draview operator's answer cannot be read: {exc}") from None
    return output(result, workload, asked.profile, args.output, args.budget)
