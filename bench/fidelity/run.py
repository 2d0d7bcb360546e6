"""Agreement between draview and the real allocator on many random worlds.

    python bench/fidelity/run.py --worlds 10000 [--start 0] [--json out.json]

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

from tests.fidelity.harness import compare_devices, device_case, engine_verdicts  # noqa: E402
from tests.fidelity.oracle import Oracle  # noqa: E402
from tests.fidelity.worldgen import generate  # noqa: E402

BATCH = 200


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=10_000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    started = time.monotonic()
    totals: Counter[str] = Counter()
    states: Counter[str] = Counter()
    examples: list[str] = []
    with Oracle() as oracle:
        for first in range(args.start, args.start + args.worlds, BATCH):
            seeds = range(first, min(first + BATCH, args.start + args.worlds))
            worlds = [generate(s) for s in seeds]
            answers = oracle.ask_many([device_case(str(w.seed), w.objects) for w in worlds])
            for world, answer in zip(worlds, answers, strict=True):
                totals["worlds"] += 1
                totals["devices"] += len(answer["probes"])
                for verdict, state, reason in engine_verdicts(world.objects).values():
                    states[f"{state}/{reason}" if reason else state] += 1
                    totals["order_dependent"] += verdict == "maybe"
                diffs = compare_devices(world.objects, answer)
                totals["disagreements"] += len(diffs)
                totals["worlds_with_disagreements"] += bool(diffs)
                examples.extend(f"seed {world.seed}: {d}" for d in diffs[: 3 - len(examples)])
    out = {
        **totals,
        "seconds": round(time.monotonic() - started, 1),
        "states": dict(states.most_common()),
        "examples": examples,
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if totals["disagreements"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
