"""`draview analyze`: the objects the operator would write, computed from a cluster dump."""

from __future__ import annotations

import argparse
import gc
import sys

from draview.api.world import build_world
from draview.cli.fit_view import add_fit_flags, run_offline
from draview.cli.inputs import InputError, iter_sources
from draview.cli.limits import add_limit_flags, limits_from_args
from draview.cli.output import as_list, write
from draview.cli.profile_flags import add_profile_flags, profile_from_args
from draview.cli.status_tables import (
    counters_table,
    devices_table,
    partitions_table,
    pools_table,
    slices_table,
)
from draview.engine.model import EngineOptions
from draview.engine.profile import DEFAULT, ProfileError
from draview.engine.world import node_assumption, world_objects


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "analyze",
        help="compute availability offline from a cluster dump",
        description=(
            "Read ResourceSlices, ResourceClaims, DeviceTaintRules and Nodes (a List, "
            "multi-document YAML or JSON, e.g. `kubectl get resourceslices,resourceclaims,"
            "devicetaintrules,nodes -A -o yaml`) and print the ResourcePoolStatus and "
            "ResourceSliceStatus objects the operator would write. Other kinds are ignored; "
            "without Nodes, the nodes the slices name are assumed to exist."
        ),
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="input files; - reads stdin")
    p.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json", "table", "wide"),
        default="yaml",
        help="output format (default yaml; wide adds every device)",
    )
    p.add_argument(
        "--partition-attribute",
        action="append",
        default=[],
        metavar="ATTR",
        help="attribute naming a partition type, e.g. gpu.example.com/profile "
        "(repeatable; a slice's own partitionTypeAttribute comes first)",
    )
    p.add_argument(
        "--max-allocations",
        type=int,
        default=32,
        metavar="N",
        help="allocations listed per device before the list is capped (default 32)",
    )
    fit_flags = p.add_argument_group("fit (docs/fit.md)")
    fit_flags.add_argument(
        "--fit",
        metavar="WORKLOAD",
        help="instead of the status objects: how many copies of the claim, template or Pod "
        "in WORKLOAD fit in the dump, one after another, and where",
    )
    add_fit_flags(fit_flags)
    add_profile_flags(p.add_argument_group("cluster profile"))
    add_limit_flags(p.add_argument_group("input limits (bad input never crashes)"))
    p.set_defaults(func=run)


def warn(message: str) -> None:
    print(f"draview analyze: warning: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if not args.files:
        print("draview analyze: no input: give FILE… or - for stdin", file=sys.stderr)
        return 2
    if not 1 <= args.max_allocations <= 1024:
        print("draview analyze: --max-allocations must be 1 to 1024", file=sys.stderr)
        return 2
    try:
        profile = profile_from_args(args, warn)
    except ProfileError as exc:
        print(f"draview analyze: {exc}", file=sys.stderr)
        return 2
    if args.fit:
        return run_offline(args, profile)
    # The decoded dump and the models are millions of acyclic containers; the cyclic
    # collector would only re-walk them, again and again, as the heap grows.
    gc.disable()
    try:
        # Streamed: each object is normalised as soon as it is decoded, then dropped.
        world = build_world(iter_sources(args.files, limits_from_args(args)))
    except InputError as exc:
        print(f"draview analyze: {exc}", file=sys.stderr)
        return 2
    # A damaged claim is a problem of each pool it names; warn once.
    for problem in dict.fromkeys(str(p) for p in world.problems):
        print(f"draview analyze: warning: {problem}", file=sys.stderr)
    if (note := node_assumption(world)) is not None:
        print(f"draview analyze: note: {note}", file=sys.stderr)
    if profile is not DEFAULT:
        print(
            f"draview analyze: note: judged as {profile.label()} "
            f"(allocator {profile.implementation})",
            file=sys.stderr,
        )
    if (caveat := profile.caveat()) is not None:
        print(f"draview analyze: warning: {caveat}", file=sys.stderr)
    options = EngineOptions(
        partition_attributes=tuple(args.partition_attribute),
        max_listed_allocations=args.max_allocations,
        profile=profile,
    )
    items = world_objects(world, options)
    if args.output in ("yaml", "json"):
        write(as_list(items), args.output, sys.stdout)
        return 0
    pools = [o for o in items if o["kind"] == "ResourcePoolStatus"]
    slices = [o for o in items if o["kind"] == "ResourceSliceStatus"]
    wide = args.output == "wide"
    parts = [
        pools_table(pools, wide),
        counters_table(pools),
        partitions_table(pools),
        slices_table(slices, wide),
    ]
    if wide:
        parts.append(devices_table(slices, wide))
    sys.stdout.write("\n".join(p for p in parts if p))
    return 0
