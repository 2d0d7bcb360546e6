"""How many of N generated worlds have each generator feature (no oracle: fast).

python bench/fidelity/features.py [--worlds 10000] [--start 0] [--only PREFIX ...]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fidelity.worldgen import FEATURES, generate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=10_000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=[], help="features to print (default all)")
    args = ap.parse_args()
    counts: Counter[str] = Counter()
    with_nodes = 0
    for seed in range(args.start, args.start + args.worlds):
        world = generate(seed)
        counts.update(world.features)
        with_nodes += any(o.get("kind") == "Node" for o in world.objects)
    print(f"{'FEATURE':<28}WORLDS (of {args.worlds})")
    print(f"{'node-objects':<28}{with_nodes}")
    for feature in FEATURES:
        if not args.only or feature in args.only:
            print(f"{feature:<28}{counts[feature]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
