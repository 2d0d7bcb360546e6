"""Agreement between draview and the real allocator on many random worlds.

    python bench/fidelity/run.py --worlds 10000 [--start 0] [--json out.json]
        [--kubernetes-version 1.35 [--all-gates]]

Every device of every world (tests/fidelity/worldgen.py) is probed with the allocator
library (e2e/oracle) and compared with draview's state; devices whose answer depends on
the order the scheduler lists slices are counted apart. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fidelity.harness import (
    claims_case,
    compare_claims,
    compare_devices,
    compare_partitions,
    device_case,
    engine_verdicts,
    partition_case,
    reduce,
)
from tests.fidelity.oracle import Oracle
from tests.fidelity.served import served_world
from tests.fidelity.worldgen import generate

from draview.engine.model import EngineOptions
from draview.engine.profile import DEFAULT, all_gates_on, make_profile, parse_release

BATCH = 200


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=10_000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--claims", action="store_true", help="also every pending claim (`why`) and partition"
    )
    ap.add_argument(
        "--kubernetes-version",
        help="judge as this release's scheduler, asked of that release's allocator "
        "(default: draview's default profile)",
    )
    ap.add_argument(
        "--all-gates", action="store_true", help="with every DRA gate on, not the defaults"
    )
    args = ap.parse_args()
    if args.kubernetes_version:
        release = parse_release(args.kubernetes_version)
        profile = all_gates_on(release) if args.all_gates else make_profile(release)
    else:
        profile = DEFAULT
    started = time.monotonic()
    totals: Counter[str] = Counter()
    states: Counter[str] = Counter()
    examples: list[str] = []
    with Oracle(profile=profile) as oracle:
        for first in range(args.start, args.start + args.worlds, BATCH):
            seeds = range(first, min(first + BATCH, args.start + args.worlds))
            # As the profile's API server holds them (1.34's layout, gated fields dropped).
            worlds = [served_world(generate(s), profile) for s in seeds]
            answers = oracle.ask_many(
                [device_case(str(w.seed), w.objects, profile) for w in worlds]
            )
            for world, answer in zip(worlds, answers, strict=True):
                totals["worlds"] += 1
                totals["devices"] += len(answer["probes"])
                verdicts = engine_verdicts(world.objects, EngineOptions(profile=profile))
                for verdict, state, reason in verdicts.values():
                    states[f"{state}/{reason}" if reason else state] += 1
                    totals["order_dependent"] += verdict == "maybe"
                diffs = compare_devices(world.objects, answer, profile, oracle)
                totals["disagreements"] += len(diffs)
                totals["worlds_with_disagreements"] += bool(diffs)
                examples.extend(f"seed {world.seed}: {d}" for d in diffs[: 3 - len(examples)])
            if args.claims:
                answers = oracle.ask_many(
                    [claims_case(str(w.seed), w.objects, w.pending) for w in worlds]
                )
                for world, answer in zip(worlds, answers, strict=True):
                    cdiffs, unknown = compare_claims(
                        world.objects, world.pending, answer, profile, oracle
                    )
                    totals["claims"] += len(answer["probes"])
                    totals["claims_order_dependent"] += sum(
                        reduce(p["nodes"]) == "maybe" for p in answer["probes"]
                    )
                    totals["claims_undecided"] += unknown
                    totals["claim_disagreements"] += len(cdiffs)
                    examples.extend(f"seed {world.seed}: {d}" for d in cdiffs[:1])
                cases = [
                    partition_case(str(w.seed), w.objects, w.partition_attributes, profile)
                    for w in worlds
                ]
                answers = oracle.ask_many([case for case, _ in cases])
                for world, (_, expect), answer in zip(worlds, cases, answers, strict=True):
                    pdiffs = compare_partitions(expect, answer)
                    totals["partition_probes"] += len(expect)
                    totals["partition_disagreements"] += len(pdiffs)
                    examples.extend(f"seed {world.seed}: {d}" for d in pdiffs[:1])
    out = {
        "profile": profile.label(),
        "allocator": profile.implementation,
        **totals,
        "seconds": round(time.monotonic() - started, 1),
        "states": dict(states.most_common()),
        "examples": examples,
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    bad = totals["disagreements"] + totals["claim_disagreements"]
    return 1 if bad + totals["partition_disagreements"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
