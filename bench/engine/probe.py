"""A capacity probe in the operator's own code (issue 40, point 6): the controller's
store, reconciler and capacity module (controller/capacity.py) in process, fed the
engine benchmark world (bench/engine/generate.py: 1,000 nodes, 208,000 MIG devices,
50,000 claims), with one probe for any MIG partition (fit.py's claim), no count.

After the first answer, each of --changes changes frees one allocated claim or takes
its device back (a claim event). The batch that judges the pool again is the operator's
work for any change and is not counted; what is timed is what the probe adds: deciding
that it is due (`_mark_due`), asking it again with its memo (`_ask`: the pools it
counts on gathered, `fit`, the answer) and exporting its metrics. bench/engine/fit.py
times `fit` alone; the difference is the operator's own share. Then claims in 1, 2, 4
and 8 pools are changed before one asking: the cost per touched pool is the slope, and
what every asking costs besides is what is left at none.

    python bench/engine/generate.py && python bench/engine/probe.py
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "operator"))

import draview.controller.capacity as capacity  # noqa: E402
from draview.api.probes import ProbeSpec  # noqa: E402
from draview.controller.core import Controller, Settings  # noqa: E402
from draview.controller.ratelimit import TokenBucket  # noqa: E402
from draview.controller.writer import Writer  # noqa: E402

OUT = REPO / "bench" / "out"
TOUCHED = (1, 2, 4, 8)  # pools changed before one asking (_per_touched_pool)
ROUNDS = 12
PROBE = "one-mig"
CLAIM = {
    "devices": {"requests": [{"name": "mig", "exactly": {"deviceClassName": "mig.example.com"}}]}
}


class _NoApi:
    """Stands in for the API client: nothing is flushed here (the status objects are
    not what is measured)."""

    def __getattr__(self, name: str) -> None:
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", default=str(OUT / "world.json"), help="dump from generate.py")
    ap.add_argument("--changes", type=int, default=20, help="claim changes timed (default 20)")
    ap.add_argument("--json-out", default=str(OUT / "probe-result.json"))
    args = ap.parse_args(argv)
    if args.changes < 1:
        print("probe.py: --changes must be at least 1", file=sys.stderr)
        return 2
    try:
        items = json.loads(Path(args.input).read_text())["items"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"probe.py: cannot read {args.input}: {exc}", file=sys.stderr)
        return 2
    report = asyncio.run(_run(items, args.changes))
    Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    for key, value in report.items():
        print(f"{key:>24}: {value}")
    return 0


async def _run(items: list[dict[str, Any]], changes: int) -> dict[str, Any]:
    gc.disable()  # as fit.py: the collector's pauses are not the probe's
    writer = Writer(_NoApi(), TokenBucket(1e9, 1_000_000))  # type: ignore[arg-type]
    ctl = Controller(writer, Settings())  # as installed: pending claims explained too
    ctl.leader = True
    ingest = ctl.ingest
    claims: list[dict[str, Any]] = []
    for obj in items:
        kind = obj["kind"]
        if kind == "DeviceClass":
            ingest.class_event("ADDED", obj)
        elif kind == "ResourceSlice":
            ingest.slice_event("ADDED", obj)
        elif kind == "ResourceClaim":
            ingest.claim_event("ADDED", obj)
            claims.append(obj)
    rec = ctl.reconciler
    rec.compute(list(rec.store.pools()))
    spent = _time_fit()
    cap = ctl.capacity
    cap.define({PROBE: ProbeSpec(PROBE, "default/probes:one-mig", claim=CLAIM)}, [], {})
    probe = cap.probes[PROBE]
    start = time.process_time()
    await cap._mark_due()
    probe.answer = await cap._ask(probe)
    cap._export(PROBE, probe)
    first = time.process_time() - start
    times: list[float] = []
    fits: list[float] = []
    for i in range(changes):
        claim = claims[(i // 2) * 997 % len(claims)]
        if i % 2 == 0:
            ingest.claim_event("DELETED", claim)
        else:
            ingest.claim_event("ADDED", copy.deepcopy(claim))
        pool = claim["status"]["allocation"]["devices"]["results"][0]
        rec.compute([(pool["driver"], pool["pool"])])  # the batch: any change's cost
        start = time.process_time()
        await cap._mark_due()
        assert probe.due, "a change to a pool the probe counts on leaves it not due"
        probe.due = False
        probe.answer = await cap._ask(probe)
        cap._export(PROBE, probe)
        times.append(time.process_time() - start)
        fits.append(spent.pop())
    times.sort()
    fits.sort()
    slope = await _per_touched_pool(ingest, rec, cap, probe, claims)
    return {
        "clock": "cpu",
        "pools": len(rec.results),
        "first_answer_s": round(first, 3),
        "changes": changes,
        "copies": probe.answer.copies if probe.answer else None,
        "update_median_ms": round(1000 * times[len(times) // 2], 2),
        "update_max_ms": round(1000 * times[-1], 2),
        "update_fit_median_ms": round(1000 * fits[len(fits) // 2], 2),
        "update_target_ms": 1.0,
        **slope,
    }


async def _per_touched_pool(
    ingest: Any, rec: Any, cap: Any, probe: Any, claims: list[dict[str, Any]]
) -> dict[str, Any]:
    """What an update costs per pool it must look at again, apart from what every
    asking costs: claims in 1, 2, 4 and 8 pools changed before one asking (each freed,
    then taken back), the four in turn in each of 12 rounds so that the host's speed
    drifting over the run weighs on each alike. Per pool: the median over the rounds'
    askings of (8 pools less 1 pool) / 7; what is left at none: the median at one pool
    less that."""
    times: dict[int, list[float]] = {k: [] for k in TOUCHED}
    step = 0
    for _ in range(ROUNDS):
        for k in TOUCHED:
            chosen = [claims[(step * 31 + i * 1009) % len(claims)] for i in range(k)]
            step += 1
            for event in ("DELETED", "ADDED"):
                pools = []
                for claim in chosen:
                    ingest.claim_event(event, claim if event == "DELETED" else copy.deepcopy(claim))
                    r = claim["status"]["allocation"]["devices"]["results"][0]
                    pools.append((r["driver"], r["pool"]))
                rec.compute(pools)
                start = time.process_time()
                await cap._mark_due()
                probe.due = False
                probe.answer = await cap._ask(probe)
                cap._export(PROBE, probe)
                times[k].append(time.process_time() - start)
    low, high = TOUCHED[0], TOUCHED[-1]
    per_pool = _median(
        [(b - a) / (high - low) for a, b in zip(times[low], times[high], strict=True)]
    )
    return {
        "update_by_touched_pools_ms": {k: round(1000 * _median(v), 2) for k, v in times.items()},
        "update_per_touched_pool_ms": round(1000 * per_pool, 2),
        "update_each_asking_ms": round(1000 * (_median(times[low]) - per_pool), 2),
    }


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _time_fit() -> list[float]:
    """The CPU time of each `fit` the capacity module asks (in its worker thread)."""
    spent: list[float] = []
    real = capacity.fit

    def timed(*args: Any, **kw: Any) -> Any:
        start = time.process_time()
        try:
            return real(*args, **kw)
        finally:
            spent.append(time.process_time() - start)

    capacity.fit = timed  # type: ignore[assignment]
    return spent


if __name__ == "__main__":
    sys.exit(main())
