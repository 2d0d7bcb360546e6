"""`kubectl dra fit WORKLOAD`: how many copies of a workload fit, where, and what blocks
the next one (docs/fit.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from draview.cli.dra.allocations import OPERATOR
from draview.cli.dra.cluster import NotFound
from draview.cli.dra.common import CliError, UsageError
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
from draview.explain.fit import FitError


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "fit",
        parents=[common],
        help="how many copies of a claim, template or Pod fit, where, and what blocks the next",
        description="Place copies of WORKLOAD (a ResourceClaim, ResourceClaimTemplate, or a "
        "Pod, Deployment, StatefulSet, Job... whose spec.resourceClaims name templates and "
        "claims) one after another as the scheduler's allocator would, each on top of the "
        "copies before, a Pod's claims on one node. Only DRA is judged. Templates and "
        "claims the file does not hold are read from the cluster (or the -f dump).",
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

    def lookup(kind: str, ns: str, name: str) -> dict[str, Any] | None:
        try:
            return source.one(kind, name, ns)
        except NotFound:
            return None

    try:
        workload = read_workload_file(args.workload, args, lookup, namespace)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    except WorkloadError as exc:
        if exc.missing:
            raise CliError(str(exc)) from None  # kubectl's exit code for a missing object
        raise UsageError(str(exc)) from None
    world, results, origin = source.judged_world()
    if origin == OPERATOR:
        note(f"allocations as recorded in {origin} (--live reads every claim)")
    try:
        result = answer(world, workload, source.profile(), args, results)
    except FitError as exc:
        raise UsageError(str(exc)) from None
    sys.stdout.write(output(result, workload, source.profile(), args.output, args.budget))
    return 0
