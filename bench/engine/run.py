"""Engine benchmark: how the pure engine copes with a 1,000-node MIG world.

Measures, each in a fresh subprocess so one measurement never pollutes another's memory
or heap:

  floor    (a) the decode floor: `json.loads` of the dump, nothing else, and its peak RSS
  compute  (b) the streamed load (decode + build_world, item by item) + world_objects(...),
           (c) its peak RSS; then, on the World it built (the peak is read before),
           (d) the operator's steady state: indexes built once, one claim changes
           (released, then allocated again) and only the affected pool is recomputed
  profile  (--profile) cProfile of the streamed load + world_objects: top functions

Every measurement runs --repeat times; times are the best run, peak RSS the highest.
By default every measurement is made under both collector settings: the interpreter's
default garbage collector (what a process gets unless it says otherwise; the targets are
judged on this) and `gc.disable()` (nothing the engine builds has cycles, so this shows
what the cyclic collector costs). Targets are reported; the process fails on a missed
one only with --check.

    python bench/engine/generate.py && python bench/engine/run.py
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "bench" / "out"
# Measure the engine of this tree (or of --tree), whichever checkout `pip install -e` last
# pointed at: children put that tree's operator/ first on sys.path before any import.
sys.path.insert(0, str(REPO / "operator"))
# Wall time by default; --clock cpu times each phase in the process's own CPU time, for a
# shared machine whose other load would otherwise be counted (both sides of a ratio alike).
_clock = time.perf_counter
DEFAULT_INPUT = OUT / "world.json"
DEFAULT_JSON = OUT / "engine-result.json"

# The targets: full compute / decode floor with the collector on and off, peak
# RSS, and one pool after a claim change (median; the p99 bound is this bench's own).
TARGET_RATIO_ON = 2.0
TARGET_RATIO_OFF = 3.0
TARGET_RSS_MIB = 800.0
TARGET_POOL_MEDIAN_MS = 1.0
TARGET_POOL_P99_MS = 2.0
GC_MODES = {"on": ("on",), "off": ("off",), "both": ("on", "off")}


def _rss_mib() -> float:
    # Linux reports ru_maxrss in KiB (macOS in bytes; this bench targets Linux).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_now_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _read(path: str) -> tuple[str, float]:
    start = _clock()
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    return text, _clock() - start


def _options(attrs: Sequence[str]) -> Any:
    from draview.engine.model import EngineOptions

    return EngineOptions(partition_attributes=tuple(attrs))


# ---------------------------------------------------------------- child phases


def phase_floor(args: argparse.Namespace) -> dict[str, Any]:
    rss_start = _rss_mib()
    text, read_s = _read(args.input)
    start = _clock()
    docs = json.loads(text)
    decode_s = _clock() - start
    return {
        "read_s": read_s,
        "decode_s": decode_s,
        "items": len(docs.get("items", ())),
        "rss_start_mib": rss_start,
        "rss_peak_mib": _rss_mib(),
    }


class _Timed:
    """Wraps a module-level function to add up the time spent in it."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.total = 0.0
        self.calls = 0

    def __call__(self, *a: Any, **kw: Any) -> Any:
        start = _clock()
        try:
            return self.fn(*a, **kw)
        finally:
            self.total += _clock() - start
            self.calls += 1


def phase_compute(args: argparse.Namespace) -> dict[str, Any]:
    import draview.engine.world as engine_world
    from draview.api.world import build_world, iter_objects
    from draview.cli.inputs import iter_text
    from draview.engine.world import world_objects

    options = _options(args.partition_attribute)
    # Split world_objects into its parts without copying it: it looks these names up
    # in its module at call time.
    timed = {
        name: _Timed(getattr(engine_world, name))
        for name in ("compute_world", "compute_pool", "result_objects")
    }
    for name, wrapper in timed.items():
        setattr(engine_world, name, wrapper)
    t_world, t_pool, t_objs = timed.values()

    rss_start = _rss_now_mib()
    text, read_s = _read(args.input)
    t0 = _clock()
    # The pipeline of `draview analyze`: each List item is decoded, normalised and
    # dropped before the next one is decoded.
    world = build_world(iter_objects(iter_text(text, args.input)))
    t1 = _clock()
    rss_loaded = _rss_now_mib()
    del text
    objects = world_objects(world, options)
    t2 = _clock()
    rss_peak = _rss_mib()

    problems = len(world.problems)
    validation_errors = sum(
        len(o["status"].get("validationErrors", ()))
        for o in objects
        if o["kind"] == "ResourcePoolStatus"
    )
    n_objects = len(objects)
    del objects
    if gc.isenabled():
        gc.collect()  # a settled heap, as in an operator that has been running a while
    pool = _pool_changes(world, args, options)
    return {
        "read_s": read_s,
        "load_s": t1 - t0,
        "world_objects_s": t2 - t1,
        "indexes_s": t_world.total - t_pool.total,
        "compute_pool_s": t_pool.total,
        "result_objects_s": t_objs.total,
        "sort_s": (t2 - t1) - t_world.total - t_objs.total,
        "total_s": t2 - t0,
        "pools": t_pool.calls,
        "slices": len(world.slices),
        "devices": sum(len(s.devices) for s in world.slices),
        "claims": len(world.claims),
        "objects": n_objects,
        "problems": problems,
        "validation_errors": validation_errors,
        "rss_start_mib": rss_start,
        "rss_loaded_mib": rss_loaded,
        "rss_peak_mib": rss_peak,
        "pool": pool,
    }


def _pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _pool_changes(world: Any, args: argparse.Namespace, options: Any) -> dict[str, Any]:
    """(d): the operator's steady state. Indexes are built once; then one claim at a time
    is released (even steps) or allocated again (odd steps), the index is updated the way
    a store would, and only the pools the claim names are recomputed."""
    from draview.engine.allocations import claim_allocations, index_allocations
    from draview.engine.flatten import flatten_slice
    from draview.engine.pool import PreparedPool, compute_pool, prepare_pool
    from draview.engine.pools import gather_pool, group_slices
    from draview.engine.validate import parse_pool

    t0 = _clock()
    by_pool = group_slices(world.slices)
    index = index_allocations(world.claims)
    indexes_s = _clock() - t0
    rules = world.taint_rules

    def allocated(key: tuple[str, str]) -> int:
        r = compute_pool(key, by_pool[key], index.get(key, ()), rules, (), options)
        return int(r.status["summary"]["allocatedDevices"])

    rng = random.Random(args.seed)
    claims = [c for c in world.claims if c.results]
    compute_ms: list[float] = []
    change_ms: list[float] = []
    slice_only_ms: list[float] = []
    prepared_ms: list[float] = []
    # The operator keeps each pool's slice-only half (PreparedPool) between claim changes.
    prepared: dict[tuple[str, str], PreparedPool] = {}
    warmup = 10
    for i in range(warmup + args.pool_reps):
        if i % 2 == 0:
            claim = rng.choice(claims)
            old, new = claim, claim.model_copy(update={"results": (), "allocated": False})
            pool_key = (claim.results[0].driver, claim.results[0].pool)
            before = allocated(pool_key)
        else:
            old, new = new, claim
        t0 = _clock()
        old_refs, new_refs = claim_allocations(old), claim_allocations(new)
        for key in old_refs:
            index[key] = [r for r in index.get(key, ()) if r.claim_uid != old.uid]
        for key, refs in new_refs.items():
            index.setdefault(key, []).extend(refs)
        dirty = sorted(set(old_refs) | set(new_refs))
        t1 = _clock()
        results = [
            compute_pool(k, by_pool.get(k, []), index.get(k, ()), rules, (), options) for k in dirty
        ]
        t2 = _clock()
        # The part of compute_pool that depends on the slices only, not on any claim:
        # what a cache keyed by the pool's slices would save on a claim change.
        for k in dirty:
            parse_pool([flatten_slice(s) for s in gather_pool(k, by_pool.get(k, [])).current])
        t3 = _clock()
        for k in dirty:
            if k not in prepared:
                prepared[k] = prepare_pool(k, by_pool.get(k, []))
        t4 = _clock()
        cached = [
            compute_pool(
                k, by_pool.get(k, []), index.get(k, ()), rules, (), options, prepared=prepared[k]
            )
            for k in dirty
        ]
        t5 = _clock()
        if cached[0].status != results[0].status:
            raise SystemExit(f"pool {dirty[0]}: prepared and fresh computations differ")
        if i % 2 == 0:
            # The benchmark is only worth something if the change is really seen.
            after = int(results[0].status["summary"]["allocatedDevices"])
            if after != before - 1:
                raise SystemExit(f"pool {pool_key}: allocated {before} -> {after}, expected -1")
        if i >= warmup:
            compute_ms.append((t2 - t1) * 1000)
            change_ms.append((t2 - t0) * 1000)
            slice_only_ms.append((t3 - t2) * 1000)
            prepared_ms.append((t5 - t4) * 1000)
    devices = [sum(len(s.devices) for s in by_pool[k]) for k in by_pool]
    return {
        "indexes_s": indexes_s,
        "reps": len(compute_ms),
        "pool_devices": statistics.median(devices),
        "compute_median_ms": statistics.median(compute_ms),
        "compute_p99_ms": _pct(compute_ms, 99),
        "compute_max_ms": max(compute_ms),
        "change_median_ms": statistics.median(change_ms),
        "change_p99_ms": _pct(change_ms, 99),
        "slice_only_median_ms": statistics.median(slice_only_ms),
        "prepared_median_ms": statistics.median(prepared_ms),
        "prepared_p99_ms": _pct(prepared_ms, 99),
    }


def phase_profile(args: argparse.Namespace) -> dict[str, Any]:
    import cProfile
    import io
    import pstats

    from draview.api.world import build_world, iter_objects
    from draview.cli.inputs import iter_text
    from draview.engine.world import world_objects

    options = _options(args.partition_attribute)
    text, _ = _read(args.input)
    prof = cProfile.Profile()
    start = _clock()
    prof.enable()
    world = build_world(iter_objects(iter_text(text, args.input)))
    del text
    world_objects(world, options)
    prof.disable()
    elapsed = _clock() - start
    stats = pstats.Stats(prof)
    tables = {}
    for order in ("cumulative", "tottime"):
        buf = io.StringIO()
        stats.stream = buf  # type: ignore[attr-defined]
        stats.sort_stats(order).print_stats(args.top)
        tables[order] = _trim_pstats(buf.getvalue())
    return {"profiled_s": elapsed, "cumulative": tables["cumulative"], "tottime": tables["tottime"]}


def _trim_pstats(text: str) -> str:
    """Keep the table only, with paths shortened to the package."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    out = []
    for line in lines[start:]:
        if not line.strip():
            continue
        for marker in ("/operator/draview/", "/site-packages/", "/lib/python3"):
            head, sep, tail = line.partition(marker)
            if sep:
                cut = head.rfind(" ")
                line = head[: cut + 1] + tail
                break
        out.append(line)
    return "\n".join(out)


PHASES = {
    "floor": phase_floor,
    "compute": phase_compute,
    "profile": phase_profile,
}


# ---------------------------------------------------------------- parent


def _child(args: argparse.Namespace, phase: str, gc_mode: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--phase",
        phase,
        "--gc",
        gc_mode,
        "--input",
        str(args.input),
        "--pool-reps",
        str(args.pool_reps),
        "--seed",
        str(args.seed),
        "--top",
        str(args.top),
        "--clock",
        args.clock,
        "--tree",
        str(args.tree),
    ]
    for attr in args.partition_attribute:
        cmd += ["--partition-attribute", attr]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"phase {phase} (gc {gc_mode}) failed with exit code {proc.returncode}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - start
    print(f"  {phase:8} gc {gc_mode:3} done in {result['wall_s']:5.1f}s", file=sys.stderr)
    return result


def _best(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The run with the smallest `key`, with peak RSS replaced by the highest seen."""
    best = dict(min(runs, key=lambda r: r[key]))
    if "rss_peak_mib" in best:
        best["rss_peak_mib"] = max(r["rss_peak_mib"] for r in runs)
    best["samples"] = [round(r[key], 4) for r in runs]
    return best


def _engine_version(tree: Path) -> dict[str, str]:
    def git(*cmd: str) -> str:
        proc = subprocess.run(
            ["git", "-C", str(tree), *cmd], capture_output=True, text=True, check=False
        )
        return proc.stdout.strip()

    dirty = git(
        "status",
        "--porcelain",
        "--",
        *(f"operator/draview/{p}" for p in ("engine", "api", "quantity.py", "cli/inputs.py")),
    )
    return {
        "path": str(tree / "operator" / "draview"),
        "commit": git("rev-parse", "--short", "HEAD") + (" (engine modified)" if dirty else ""),
    }


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def evaluate(modes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Targets, judged on the default collector (the first mode measured)."""
    mode = "on" if "on" in modes else next(iter(modes))
    m = modes[mode]
    ratio = m["compute"]["total_s"] / m["floor"]["decode_s"]
    rss = m["compute"]["rss_peak_mib"]
    pool = m["pool"]
    extra = []
    if mode != "off" and "off" in modes:
        # The collector slows json.loads far more than the engine, which pauses it for
        # bulk work: judge the ratio with the collector off on both sides as well.
        off = modes["off"]["compute"]["total_s"] / modes["off"]["floor"]["decode_s"]
        extra.append(
            {
                "target": f"full compute <= {TARGET_RATIO_OFF:g}x decode floor (gc off, both)",
                "value": round(off, 2),
                "pass": off <= TARGET_RATIO_OFF,
            }
        )
    limit = TARGET_RATIO_OFF if mode == "off" else TARGET_RATIO_ON
    return [
        *extra,
        {
            "target": f"full compute <= {limit:g}x decode floor (gc {mode})",
            "value": round(ratio, 2),
            "pass": ratio <= limit,
        },
        {
            "target": f"compute peak RSS <= {TARGET_RSS_MIB:g} MiB (gc {mode})",
            "value": round(rss, 1),
            "pass": rss <= TARGET_RSS_MIB,
        },
        # Judged on what the operator does after a claim change: its pool's slices are
        # prepared already (the uncached figure stays in the table).
        {
            "target": f"one pool after a claim change, median <= {TARGET_POOL_MEDIAN_MS:g} ms",
            "value": round(pool["prepared_median_ms"], 3),
            "pass": pool["prepared_median_ms"] <= TARGET_POOL_MEDIAN_MS,
        },
        {
            "target": f"one pool after a claim change, p99 <= {TARGET_POOL_P99_MS:g} ms",
            "value": round(pool["prepared_p99_ms"], 3),
            "pass": pool["prepared_p99_ms"] <= TARGET_POOL_P99_MS,
        },
    ]


def render(report: dict[str, Any]) -> str:
    modes: dict[str, dict[str, Any]] = report["modes"]
    names = list(modes)
    rows: list[tuple[str, ...]] = []

    def row(label: str, fn: Callable[[dict[str, Any]], str]) -> None:
        rows.append((label, *(fn(modes[n]) for n in names)))

    first = modes[names[0]]["compute"]
    lines = [
        f"world: {report['input']} ({report['input_mib']:.1f} MiB): {first['slices']} slices, "
        f"{first['devices']} devices in {first['pools']} pools, {first['claims']} claims "
        f"-> {first['objects']} objects, {first['validation_errors']} validation errors",
        f"engine: {report['engine']['path']} at {report['engine']['commit']}, "
        f"{report['clock']} clock; "
        f"repeat {report['repeat']}: times are the best run, RSS the highest run; "
        f"load average {report['machine']['loadavg_1m_before']} before, "
        f"{report['machine']['loadavg_1m_after']} after on {report['machine']['cpus']} CPUs",
        "",
    ]
    row("read file (s, not counted)", lambda m: f"{m['floor']['read_s']:.2f}")
    row("(a) decode floor json.loads (s)", lambda m: f"{m['floor']['decode_s']:.2f}")
    row("(b) full compute (s)", lambda m: f"{m['compute']['total_s']:.2f}")
    row("    decode + build_world, streamed", lambda m: f"{m['compute']['load_s']:.2f}")
    row("    world_objects", lambda m: f"{m['compute']['world_objects_s']:.2f}")
    row("      group_slices+index_allocations", lambda m: f"{m['compute']['indexes_s']:.2f}")
    row("      compute_pool x pools", lambda m: f"{m['compute']['compute_pool_s']:.2f}")
    row("      result_objects", lambda m: f"{m['compute']['result_objects_s']:.2f}")
    row("      filter + sort", lambda m: f"{m['compute']['sort_s']:.2f}")
    row(
        "    full / floor",
        lambda m: f"{m['compute']['total_s'] / m['floor']['decode_s']:.2f}x",
    )
    row("(c) peak RSS decode floor (MiB)", lambda m: f"{m['floor']['rss_peak_mib']:.0f}")
    row("    peak RSS full compute (MiB)", lambda m: f"{m['compute']['rss_peak_mib']:.0f}")
    row("      resident after imports", lambda m: f"{m['compute']['rss_start_mib']:.0f}")
    row(
        "      ... after the streamed load (text + World)",
        lambda m: f"{m['compute']['rss_loaded_mib']:.0f}",
    )
    row("(d) indexes once (s)", lambda m: f"{m['pool']['indexes_s']:.2f}")
    row(
        "    compute_pool median / p99 (ms)",
        lambda m: f"{m['pool']['compute_median_ms']:.2f} / {m['pool']['compute_p99_ms']:.2f}",
    )
    row(
        "    index update + compute median / p99",
        lambda m: f"{m['pool']['change_median_ms']:.2f} / {m['pool']['change_p99_ms']:.2f}",
    )
    row(
        "    slice-only part median (ms, cacheable)",
        lambda m: f"{m['pool']['slice_only_median_ms']:.2f}",
    )
    row(
        "    compute_pool, slices prepared (operator)",
        lambda m: f"{m['pool']['prepared_median_ms']:.2f} / {m['pool']['prepared_p99_ms']:.2f}",
    )
    header = ("", *(f"gc {n}" + (" (default)" if n == "on" else "") for n in names))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        lines.append(
            "  ".join(
                c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)
            ).rstrip()
        )
    pool = modes[names[0]]["pool"]
    lines.append(
        f"    ({pool['reps']} claim changes, one pool of {pool['pool_devices']:.0f} devices each)"
    )
    lines.append("")
    for t in report["targets"]:
        lines.append(f"{_verdict(t['pass'])}  {t['target']}: {t['value']}")
    if "profile" in report:
        p = report["profile"]
        lines += [
            "",
            f"cProfile of the streamed load + world_objects (gc off, {p['profiled_s']:.1f}s)",
            "by cumulative time:",
            p["cumulative"],
            "by own time:",
            p["tottime"],
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=str(DEFAULT_INPUT), help="dump from generate.py")
    ap.add_argument("--repeat", type=int, default=2, help="runs per measurement (default 2)")
    ap.add_argument("--pool-reps", type=int, default=200, help="claim changes timed")
    ap.add_argument("--gc", choices=("on", "off", "both"), default="both")
    ap.add_argument(
        "--partition-attribute",
        action="append",
        default=[],
        metavar="ATTR",
        help="also compute partitions by this attribute (as draview analyze does)",
    )
    ap.add_argument("--profile", action="store_true", help="add a cProfile run (about +25s)")
    ap.add_argument("--top", type=int, default=10, help="profile rows shown")
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="time phases in wall time (default) or in the process's CPU time",
    )
    ap.add_argument(
        "--tree",
        type=Path,
        default=REPO,
        help="the checkout whose engine is measured (default: this one), for side-by-side runs",
    )
    ap.add_argument("--seed", type=int, default=1, help="which claims change in (d)")
    ap.add_argument("--json-out", default=str(DEFAULT_JSON), help="where the JSON goes")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    ap.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.pool_reps < 2:
        ap.error("--repeat must be at least 1 and --pool-reps at least 2")

    if args.phase:
        global _clock
        sys.path.insert(0, str(args.tree.resolve() / "operator"))
        if args.clock == "cpu":
            _clock = time.process_time
        if args.gc == "off":
            gc.disable()
        print(json.dumps(PHASES[args.phase](args)))
        return 0

    if not os.path.exists(args.input):
        print(f"{args.input}: not found; run bench/engine/generate.py first", file=sys.stderr)
        return 2
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    modes: dict[str, dict[str, Any]] = {}
    for mode in GC_MODES[args.gc]:
        runs: dict[str, list[dict[str, Any]]] = {"floor": [], "compute": []}
        # Interleaved, so a burst of load from elsewhere hits both sides alike.
        for _ in range(args.repeat):
            for phase in runs:
                runs[phase].append(_child(args, phase, mode))
        modes[mode] = {
            "floor": _best(runs["floor"], "decode_s"),
            "compute": _best(runs["compute"], "total_s"),
            "pool": _best([r["pool"] for r in runs["compute"]], "compute_median_ms"),
        }
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            # Other work on the machine skews times (not RSS); kept to judge a run by.
            "loadavg_1m_before": round(load_before, 2),
            "loadavg_1m_after": round(os.getloadavg()[0], 2),
        },
        "engine": _engine_version(args.tree.resolve()),
        "clock": args.clock,
        "input": args.input,
        "input_mib": os.path.getsize(args.input) / 2**20,
        "repeat": args.repeat,
        "partition_attributes": args.partition_attribute,
        "modes": modes,
        "targets": evaluate(modes),
    }
    if args.profile:
        report["profile"] = _child(args, "profile", "off")
    report["runtime_s"] = time.perf_counter() - started
    print(render(report))
    Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.json_out, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2)
        fh.write("\n")
    print(f"\nJSON: {args.json_out} (run took {report['runtime_s']:.0f}s)")
    failed = [t for t in report["targets"] if not t["pass"]]
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
