"""Do the operator and `draview analyze` agree on damaged worlds? The CI test
(tests/fidelity/test_operator_agrees.py) runs 400; this runs as many as asked.

    python bench/fuzz/agree.py 10000
"""

import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.fidelity.test_operator_agrees import damaged_world, differing  # noqa: E402

logging.disable(logging.WARNING)  # every damaged object is logged once; the figures matter
started = time.perf_counter()
worlds = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
bad = compared = 0
for seed in range(worlds):
    objects, what = damaged_world(seed)
    try:
        n, keys = differing(objects)
    except Exception as exc:
        bad += 1
        print(f"seed {seed} ({what}): {type(exc).__name__}: {exc}")
        continue
    compared += n
    if keys:
        bad += 1
        print(f"seed {seed} ({what}): {keys[:2]}")
print(
    f"damaged worlds {worlds}, objects compared {compared}, disagreements {bad}, "
    f"{time.perf_counter() - started:.0f}s"
)
sys.exit(1 if bad else 0)
