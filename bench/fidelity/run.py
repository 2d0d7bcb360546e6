"""Agreement between draview and the real allocator on many random worlds.

    python bench/fidelity/run.py --worlds 10000 [--start 0] [--json out.json [--resume]]
        [--kubernetes-version 1.35 [--all-gates]] [--claims] [--fit]
    python bench/fidelity/run.py --merge first.json second.json ... --json out.json

Every device of every world (tests/fidelity/worldgen.py) is probed with the allocator
library (e2e/oracle) and compared with draview's state; devices whose answer depends on
the order the scheduler lists slices are counted apart. With --fit, every pending claim (and
pairs of them, as the claims of one Pod) is also placed copy after copy by the allocator
and compared with `fit` (tests/fidelity/fit_harness.py). Prints one JSON object.

A 10,000-world run of a slow profile takes hours on a small machine, so `--json` is
rewritten after every batch (`complete: false` until the end) and `--resume` carries on
from its `next_seed`. The file records a hash of the code that decides the answers
(engine, generator, harness, oracle): a resume on other code is refused, since its sums
would mix two engines. For the same reason `--merge` joins only runs of one profile and
one hash whose seeds follow on from each other (a run's seeds split over processes or
machines, each with `--start` and `--worlds`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fidelity.fit_harness import compare_fit, fit_case, workloads
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
DISAGREEMENTS = (
    "disagreements",
    "claim_disagreements",
    "partition_disagreements",
    "fit_disagreements",
)
COUNTS = (
    "worlds",
    "devices",
    "order_dependent",
    *DISAGREEMENTS,
    "worlds_with_disagreements",
    "claims",
    "claims_order_dependent",
    "claims_undecided",
    "partition_probes",
    "fit_workloads",
    "fit_copies_placed",
    "fit_placement_dependent",
    "fit_undecided",
)
ROOT = Path(__file__).resolve().parents[2]
# What decides a run's answers: the engine and everything it imports, the generator and
# harness, the oracle. The operator's edges (controller, CLI) and docs may change.
JUDGING = (
    "operator/draview/api",
    "operator/draview/cel",
    "operator/draview/engine",
    "operator/draview/explain",
    "operator/draview/quantity.py",
    "operator/draview/__init__.py",
    "tests/fidelity",
    "e2e/oracle",
)


def code_hash() -> str:
    """sha256 over the names and contents of the files that decide the answers."""
    digest = hashlib.sha256()
    for top in JUDGING:
        under = ROOT / top
        for path in sorted(under.rglob("*")) if under.is_dir() else [under]:
            if path.is_file() and path.suffix in {".py", ".go", ".mod", ".sum"}:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def resumed(path: Path, label: str, code: str, claims: bool, fit: bool) -> dict[str, Any]:
    """The partial run in path, or SystemExit with one line saying why it cannot go on."""
    try:
        prior: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"run.py: --resume: cannot read {path}: {exc}") from None
    if prior.get("profile") != label:
        raise SystemExit(f"run.py: --resume: {path} is for {prior.get('profile')}, not {label}")
    if prior.get("with_claims") != claims:
        was = "with" if prior.get("with_claims") else "without"
        raise SystemExit(f"run.py: --resume: {path} was run {was} --claims; say the same now")
    if prior.get("with_fit", False) != fit:
        was = "with" if prior.get("with_fit") else "without"
        raise SystemExit(f"run.py: --resume: {path} was run {was} --fit; say the same now")
    if prior.get("code") != code:
        raise SystemExit(
            f"run.py: --resume: {path} was judged by other code ({prior.get('code')}, now {code})"
        )
    return prior


def merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One run out of runs that cover consecutive seeds: every part but the last may have
    been stopped early, where the next one starts. ValueError says why they do not join."""
    if not parts:
        raise ValueError("nothing to merge")
    parts = sorted(parts, key=lambda p: int(p["first_seed"]))
    head = parts[0]
    for key in ("profile", "allocator", "code", "with_claims", "with_fit"):
        if any(p.get(key) != head.get(key) for p in parts):
            raise ValueError(
                f"the runs differ in {key}: {sorted({str(p.get(key)) for p in parts})}"
            )
    for before, after in pairwise(parts):
        if before["next_seed"] != after["first_seed"]:
            raise ValueError(
                f"seeds do not follow on: one run stops at {before['next_seed']}, "
                f"the next starts at {after['first_seed']}"
            )
    tail = parts[-1]
    totals: Counter[str] = Counter()
    states: Counter[str] = Counter()
    for part in parts:
        totals.update({k: v for k, v in part.items() if isinstance(v, int) and k in COUNTS})
        states.update(part["states"])
    return {
        "profile": head["profile"],
        "allocator": head["allocator"],
        **totals,
        "seconds": round(sum(p["seconds"] for p in parts), 1),
        "complete": tail["next_seed"] >= tail["end_seed"],
        "first_seed": head["first_seed"],
        "next_seed": tail["next_seed"],
        "end_seed": tail["end_seed"],
        "code": head["code"],
        "with_claims": head["with_claims"],
        "with_fit": head.get("with_fit", False),
        "states": dict(states.most_common()),
        "examples": [e for p in parts for e in p["examples"]],
        "undecided_seeds": [s for p in parts for s in p.get("undecided_seeds", [])],
        "parts": [[p["first_seed"], p["next_seed"], p["seconds"]] for p in parts],
    }


def merge_files(paths: list[Path], out: Path) -> int:
    try:
        parts = [json.loads(path.read_text()) for path in paths]
        whole = merged(parts)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"run.py: --merge: {exc}", file=sys.stderr)
        return 2
    write(out, whole)
    print(json.dumps(whole, indent=2))
    return 1 if sum(whole.get(k, 0) for k in DISAGREEMENTS) else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=10_000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--json", type=Path, help="rewritten after every batch")
    ap.add_argument("--resume", action="store_true", help="carry on the partial run in --json")
    ap.add_argument(
        "--claims", action="store_true", help="also every pending claim (`why`) and partition"
    )
    ap.add_argument("--fit", action="store_true", help="also fit: copies placed one after another")
    ap.add_argument(
        "--kubernetes-version",
        help="judge as this release's scheduler, asked of that release's allocator "
        "(default: draview's default profile)",
    )
    ap.add_argument(
        "--all-gates", action="store_true", help="with every DRA gate on, not the defaults"
    )
    ap.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="RUN",
        help="join the --json files of runs over consecutive seeds into --json",
    )
    args = ap.parse_args()
    if args.merge:
        if not args.json:
            ap.error("--merge needs --json")
        return merge_files(args.merge, args.json)
    if args.kubernetes_version:
        release = parse_release(args.kubernetes_version)
        profile = all_gates_on(release) if args.all_gates else make_profile(release)
    else:
        profile = DEFAULT
    if args.resume and not args.json:
        ap.error("--resume needs --json")
    code = code_hash()
    started = time.monotonic()
    totals: Counter[str] = Counter()
    states: Counter[str] = Counter()
    examples: list[str] = []
    undecided: list[int] = []  # seeds whose claims the search budget left open
    first_seed, start, end, spent = args.start, args.start, args.start + args.worlds, 0.0
    if args.resume:
        prior = resumed(args.json, profile.label(), code, args.claims, args.fit)
        first_seed, start = prior["first_seed"], prior["next_seed"]
        end, spent = prior["end_seed"], prior["seconds"]
        totals.update({k: v for k, v in prior.items() if isinstance(v, int) and k in COUNTS})
        states.update(prior["states"])
        examples = prior["examples"]
        undecided = prior.get("undecided_seeds", [])

    def report(next_seed: int) -> dict[str, Any]:
        return {
            "profile": profile.label(),
            "allocator": profile.implementation,
            **totals,
            "seconds": round(spent + time.monotonic() - started, 1),
            "complete": next_seed >= end,
            "first_seed": first_seed,
            "next_seed": next_seed,
            "end_seed": end,
            "code": code,
            "with_claims": args.claims,
            "with_fit": args.fit,
            "states": dict(states.most_common()),
            "examples": examples,
            "undecided_seeds": undecided,
        }

    with Oracle(profile=profile) as oracle:
        for first in range(start, end, BATCH):
            seeds = range(first, min(first + BATCH, end))
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
                    if unknown:
                        undecided.append(world.seed)
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
            if args.fit:
                fit_worlds(oracle, worlds, profile, totals, examples)
            if args.json:
                write(args.json, report(seeds.stop))
            bad = sum(totals[k] for k in DISAGREEMENTS)
            print(f"seeds {seeds.stop}/{end}: {bad} disagreements", file=sys.stderr, flush=True)
    out = report(end)
    print(json.dumps(out, indent=2))
    if args.json:
        write(args.json, out)
    return 1 if sum(totals[k] for k in DISAGREEMENTS) else 0


def fit_worlds(
    oracle: Oracle, worlds: list[Any], profile: Any, totals: Counter[str], examples: list[str]
) -> None:
    """Each pending claim, and pairs of them, placed copy after copy by the allocator."""
    asked = [(w, claims) for w in worlds for claims in workloads(w.pending)]
    answers = oracle.ask_many(
        [fit_case(f"{w.seed}-{k}", w.objects, c) for k, (w, c) in enumerate(asked)]
    )
    for (world, claims), answer in zip(asked, answers, strict=True):
        got = compare_fit(world.objects, claims, answer, profile)
        totals["fit_workloads"] += 1
        totals["fit_copies_placed"] += got.copies
        totals["fit_placement_dependent"] += got.ranges
        totals["fit_undecided"] += got.undecided
        totals["fit_disagreements"] += len(got.differences)
        names = [c["metadata"]["name"] for c in claims]
        examples.extend(f"seed {world.seed} fit {names}: {d}" for d in got.differences[:1])


def write(path: Path, out: dict[str, Any]) -> None:
    # Replaced whole, so a run killed mid-write leaves the previous batch's file.
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=2) + "\n")
    tmp.replace(path)


if __name__ == "__main__":
    raise SystemExit(main())
