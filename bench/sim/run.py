"""The operator's own controller at the size of the largest clusters, by simulation.

The controller `draview run` assembles (controller/core.py: ingest, store, node index,
queue, worker, reconciler, engine, writer) is fed in process what its informers would
feed it: the pages of a list of Nodes, ResourceSlices and ResourceClaims (JSON, decoded
as the informer decodes them), then a steady stream of claim watch events. The writer is
the real one but for its requests: each is counted instead of sent (`CountingWriter`).
Nothing of the world is kept by this script (bench/sim/world.py makes a node's objects
from its index), so the memory measured is the controller's.

    python bench/sim/run.py --nodes 65000                      # one size, ~N min
    python bench/sim/run.py --curve 5000,10000,20000,65000      # each in its own process

Phases and what each records (CPU: this process's CPU seconds; RSS: resident memory after
the phase, and the peak so far):

1. list: Nodes, then ResourceSlices, then ResourceClaims, page by page (500 a page);
2. first full judgement: the leader's full sync (every pool judged, every object written);
3. steady: a second full sync of the unchanged world (a re-list, a restart's sync):
   its writes must be 0;
4. churn: `--rate` claim changes a second for `--seconds`, while the worker runs as in
   the operator (`--batch-interval`); each change is a claim deleted, or created again,
   on a whole-GPU node; its latency is from the event to the writer being handed the
   pool's new status.

With `--claim-events` the churn also runs the operator's explanations as `draview run`
does by default: every `--explain-interval` a round explains the claims pending past the
threshold (here 0: the world's 1 % pending claims, all of them due at once; one
DeviceClass per driver is listed), Events counted instead of posted, and the Events on
slices of problem pools. Recorded: each round's wall and CPU time and the claims it
explained, and the longest the event loop went without a turn (a task asks to wake
every 5 ms and records how late it woke), overall and while a round ran.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import world

from draview.controller.core import Controller, Settings
from draview.controller.ratelimit import TokenBucket
from draview.controller.status_requests import StatusRequests
from draview.controller.sync import long_lived
from draview.controller.writer import Writer

PAGE = 500


class _NoApi:
    """Stands in for the API client: the counting writer never calls it."""

    def __getattr__(self, name: str) -> None:
        return None


class CountingRequests(StatusRequests):
    """The request layer, every request counted instead of sent."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.counts: Counter[str] = Counter()
        # Give the loop a turn per request, as a request sent does (during the churn:
        # without it one writer task wrote a whole backlog in one piece).
        self.yields = False

    async def _call(self, verb: str, kind: str, fn: Any, *args: Any, **kw: Any) -> bytes:
        self.counts[f"{verb} {kind}"] += 1
        if self.yields:
            await asyncio.sleep(0)
        return b'{"metadata": {"resourceVersion": "1"}}'


class CountingWriter(Writer):
    """The operator's writer, every request counted instead of sent; each object's last
    write time is kept so that a change's latency can be read."""

    requests_class = CountingRequests

    def __init__(self) -> None:
        super().__init__(_NoApi(), TokenBucket(1e9, 1_000_000))  # type: ignore[arg-type]
        self.counting: CountingRequests = self.requests  # type: ignore[assignment]
        self.counts = self.counting.counts
        self.written_at: dict[str, float] = {}  # pool status name -> monotonic time

    async def put(self, obj: dict[str, Any]) -> bool:
        sent = await super().put(obj)
        if obj["kind"] == "ResourcePoolStatus":
            self.written_at[obj["metadata"]["name"]] = time.monotonic()
        return sent

    async def load(self) -> None:
        """A fresh cluster: the server holds no status object yet (a restart's case is
        the steady phase: the writer then knows every object)."""

    def total(self) -> int:
        return sum(self.counts.values())


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


HARNESS_CPU = [0.0]  # CPU seconds spent making the world, left out of every phase


def feed(handler: Any, objects: Any) -> int:
    """List pages as an informer applies them: decoded from JSON, then each object.
    Making and encoding a page is this script's work, not the operator's: its CPU time
    is left out of the phase."""
    n = 0
    pages = world.pages(objects, PAGE)
    while True:
        cpu = time.process_time()
        page = next(pages, None)
        text = json.dumps(page) if page is not None else ""
        HARNESS_CPU[0] += time.process_time() - cpu
        if page is None:
            return n
        for obj in json.loads(text):
            handler("MODIFIED", obj)
            n += 1


class Phases:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, float]] = {}

    def measure(self, name: str, fn: Any) -> Any:
        cpu, wall, harness = time.process_time(), time.monotonic(), HARNESS_CPU[0]
        out = fn()
        self.rows[name] = {
            "cpu_s": round(time.process_time() - cpu - (HARNESS_CPU[0] - harness), 2),
            "wall_s": round(time.monotonic() - wall, 2),
            "rss_mib": round(rss_mib(), 1),
            "peak_mib": round(peak_mib(), 1),
        }
        print(f"  {name:<16} {self.rows[name]}", file=sys.stderr, flush=True)
        return out


class LoopWatch:
    """How long the event loop went without a turn: the longest it woke late, overall and
    when a round of explanations ran meanwhile (`busy`). Each gap is measured in CPU
    seconds of this process too: on a machine shared with other jobs a wall-clock gap
    stretches with the load, the CPU spent in it does not."""

    TICK = 0.005

    def __init__(self) -> None:
        self.longest = 0.0
        self.longest_busy = 0.0
        self.longest_cpu = 0.0
        self.longest_busy_cpu = 0.0
        self.running = False  # a round runs now
        self.busy = False  # a round ran since the last wake (one in a single piece too)

    async def run(self) -> None:
        last, last_cpu = time.monotonic(), time.process_time()
        while True:
            await asyncio.sleep(self.TICK)
            now, cpu = time.monotonic(), time.process_time()
            late, used = now - last - self.TICK, cpu - last_cpu
            self.longest = max(self.longest, late)
            self.longest_cpu = max(self.longest_cpu, used)
            if self.busy:
                self.longest_busy = max(self.longest_busy, late)
                self.longest_busy_cpu = max(self.longest_busy_cpu, used)
            last, last_cpu = now, cpu
            self.busy = self.running


def watch_rounds(ctl: Controller, watch: LoopWatch) -> list[dict[str, Any]]:
    """Each round of explanations that explained something: wall and CPU seconds (CPU
    of the whole process meanwhile: other tasks run during a round's yields), the
    explanations made (claims that ask for the same devices share one since bc3dc7b,
    2026-11-25) and the claims with an explanation after it; the loop watch is told when one
    runs."""
    rounds: list[dict[str, Any]] = []
    expl = ctl.explanations
    explainer = expl.explainer.explainer
    calls = [0]
    # Explained in steps since bc3dc7b (2026-11-25); before, in one call.
    method = "explain_steps" if hasattr(explainer, "explain_steps") else "explain"
    explain, pending, slices = (
        getattr(explainer, method),
        expl.explain_pending,
        expl.report_slice_problems,
    )

    def counted(*args: Any, **kw: Any) -> Any:
        calls[0] += 1
        return explain(*args, **kw)

    async def timed(step: Any, name: str) -> None:
        before, cpu, wall = calls[0], time.process_time(), time.monotonic()
        watch.busy = watch.running = True
        try:
            await step()
        finally:
            watch.running = False
        row = {
            "step": name,
            "wall_s": round(time.monotonic() - wall, 3),
            "cpu_s": round(time.process_time() - cpu, 3),
            "explanations": calls[0] - before,
            "claims_explained": len(expl.explainer.last),
        }
        if row["explanations"] or row["wall_s"] >= 0.05:
            rounds.append(row)

    setattr(explainer, method, counted)
    expl.explain_pending = lambda: timed(pending, "claims")  # type: ignore[method-assign]
    expl.report_slice_problems = lambda: timed(slices, "slices")  # type: ignore[method-assign]
    return rounds


def watch_steps() -> list[float]:
    """The longest the explanations held the loop between two of their yields to it
    (controller/event_rounds.run_steps, timed the same way), in wall and in CPU seconds;
    [0.0, 0.0] before bc3dc7b (2026-11-25), which ran a round in one piece (the loop
    watch sees it whole)."""
    try:
        from draview.controller import event_rounds as explanations
    except ImportError:  # a commit before the module had its present name
        from draview.controller import explanations  # type: ignore[no-redef]

    longest = [0.0, 0.0]
    if not hasattr(explanations, "run_steps"):
        return longest

    def held(began: float, cpu: float) -> None:
        longest[0] = max(longest[0], time.monotonic() - began)
        longest[1] = max(longest[1], time.process_time() - cpu)

    async def timed(steps: Any, seconds: float | None = None) -> Any:
        most = explanations.STEP_SECONDS if seconds is None else seconds
        began, cpu = time.monotonic(), time.process_time()
        while True:
            try:
                next(steps)
            except StopIteration as done:
                held(began, cpu)
                return done.value
            if time.monotonic() - began >= most:
                held(began, cpu)
                await asyncio.sleep(0)
                began, cpu = time.monotonic(), time.process_time()

    explanations.run_steps = timed
    return longest


class GcWatch:
    """The longest collection of the oldest generation (it walks every object not
    frozen, and holds the loop meanwhile)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._began = time.monotonic()
        else:
            self.longest = max(self.longest, time.monotonic() - self._began)


def _pool_object(driver: str, pool: str) -> str:
    from draview.engine.objects import pool_object_name

    return pool_object_name(driver, pool)


class Watches:
    """What the churn watches besides latency: the loop, full collections and, with
    claim events on, the explanations' rounds and steps (which it runs)."""

    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl
        self.loop, self.collections = LoopWatch(), GcWatch()
        self.rounds = watch_rounds(ctl, self.loop)
        self.steps = watch_steps()
        gc.callbacks.append(self.collections)
        self.tasks = [asyncio.create_task(self.loop.run())]
        if ctl.settings.claim_events:
            self.tasks.append(asyncio.create_task(ctl.explanations.run()))

    def stop(self) -> dict[str, Any]:
        for task in self.tasks:
            task.cancel()
        gc.callbacks.remove(self.collections)
        loop, rounds = self.loop, self.rounds
        out: dict[str, Any] = {
            "longest_loop_block_s": round(loop.longest, 3),
            "longest_loop_block_cpu_s": round(loop.longest_cpu, 3),
            "longest_full_collection_s": round(self.collections.longest, 3),
        }
        if self.ctl.settings.claim_events:
            out["explanations"] = {
                "rounds": rounds,
                "longest_loop_block_in_a_round_s": round(loop.longest_busy, 3),
                "longest_loop_block_in_a_round_cpu_s": round(loop.longest_busy_cpu, 3),
                "longest_step_s": round(self.steps[0], 3),
                "longest_step_cpu_s": round(self.steps[1], 3),
                "explanations": sum(r["explanations"] for r in rounds),
                "claims_explained": len(self.ctl.explanations.explainer.last),
                "events": POSTED[0],
            }
        return out


async def churn(
    ctl: Controller, w: CountingWriter, n: int, rate: float, seconds: float, interval: float
) -> dict[str, Any]:
    """Claim changes at `rate` a second on whole-GPU nodes; latency to the pool's write."""
    rng = random.Random(7)
    whole = [i for i in range(n) if world.kind_of(i) == "whole"]
    gone: list[world.Alloc] = []
    latencies: list[float] = []
    pending: list[tuple[float, str]] = []  # (event time, pool status name)
    w.counting.yields = True
    watches = Watches(ctl)
    worker = asyncio.create_task(ctl.worker.run(interval))
    cpu0, t0 = time.process_time(), time.monotonic()
    sent = 0
    while time.monotonic() - t0 < seconds:
        due = t0 + sent / rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if gone and (rng.random() < 0.5 or len(gone) > 50):
            a = gone.pop(rng.randrange(len(gone)))
            obj = world.claim(a)
            obj["metadata"]["resourceVersion"] = str(2 + sent)
            ctl.ingest.claim_event("ADDED", obj)
        else:
            i = rng.choice(whole)
            a = world.Alloc(i, rng.randrange(world.GPUS - 1), "gpu.example.com", "")
            a = next(x for x in world.allocations(i) if x.n == a.n)
            if a in gone:
                continue
            gone.append(a)
            ctl.ingest.claim_event("DELETED", world.claim(a))
        pending.append((time.monotonic(), _pool_object(a.driver, world.node_name(a.node))))
        sent += 1
        _collect(w, pending, latencies)
    while pending and time.monotonic() - t0 < seconds + 10:
        await asyncio.sleep(0.05)
        _collect(w, pending, latencies)
    cpu = time.process_time() - cpu0
    worker.cancel()
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {
        "changes": sent,
        "judged": len(latencies),
        "p50_s": round(q[49], 3),
        "p95_s": round(q[94], 3),
        "p99_s": round(q[98], 3),
        "cpu_s": round(cpu, 2),
        "cpu_per_change_ms": round(1000 * cpu / max(1, sent), 2),
        **watches.stop(),
    }


POSTED = [0]  # Events the explanations would have posted


async def count_event(*_: Any) -> None:
    POSTED[0] += 1


def _collect(w: CountingWriter, pending: list[tuple[float, str]], out: list[float]) -> None:
    keep = []
    for at, name in pending:
        written = w.written_at.get(name, 0.0)
        if written >= at:
            out.append(written - at)
        else:
            keep.append((at, name))
    pending[:] = keep


def controller(
    interval: float, explain: float | None, classes: bool
) -> tuple[CountingWriter, Controller]:
    w = CountingWriter()
    settings = Settings(
        batch_interval=interval,
        claim_events=explain is not None,
        pending_threshold=0.0,
        explain_interval=explain or 10.0,
    )
    ctl = Controller(w, settings, count_event, count_event)
    for obj in world.device_classes() if classes else ():
        ctl.ingest.class_event("ADDED", obj)
    return w, ctl


def list_world(ctl: Controller, phases: Phases, n: int) -> dict[str, int]:
    """The lists, each a phase. As the operator's Syncer does (controller/sync.py): the
    first list (and the first full sync) run without the cyclic collector, what they
    made then frozen out of its generations."""

    def listed(kind: str, handler: Any, objects: Any) -> int:
        if kind != "claims":
            return feed(handler, objects)
        with long_lived():  # the last list: the freeze counts here
            return feed(handler, objects)

    gc.disable()
    return {
        "nodes": phases.measure(
            "list nodes", lambda: listed("nodes", ctl.ingest.node_event, world.all_nodes(n))
        ),
        "slices": phases.measure(
            "list slices", lambda: listed("slices", ctl.ingest.slice_event, world.all_slices(n))
        ),
        "claims": phases.measure(
            "list claims", lambda: listed("claims", ctl.ingest.claim_event, world.all_claims(n))
        ),
    }


def run(
    n: int,
    rate: float,
    seconds: float,
    interval: float,
    explain: float | None = None,
    classes: bool = True,
) -> dict[str, Any]:
    """`explain`: run the explanations every that many seconds (None: claim events off);
    `classes`: list the DeviceClasses (without, every explanation stops at "DeviceClass
    not found", as before bc3dc7b)."""
    w, ctl = controller(interval, explain, classes)
    phases = Phases()
    base = rss_mib()
    loop = asyncio.new_event_loop()

    def judge() -> None:
        with long_lived():
            loop.run_until_complete(ctl.worker.full_sync())

    counts = list_world(ctl, phases, n)
    devices = sum(len(s.devices) for s in ctl.store.slices.values())
    ctl.ingest.listed()
    ctl.leader = True
    phases.measure("first judgement", judge)
    first_writes = w.total()
    phases.measure("steady resync", lambda: loop.run_until_complete(ctl.worker.full_sync()))
    steady_writes = w.total() - first_writes
    gc.collect()
    after = rss_mib()
    result = {
        "nodes": n,
        "pools": len(ctl.store.pools()),
        "slices": counts["slices"],
        "devices": devices,
        "claims": counts["claims"],
        "phases": phases.rows,
        "first_judgement_cpu_s": round(
            sum(phases.rows[p]["cpu_s"] for p in phases.rows if p != "steady resync"), 2
        ),
        "writes_first": first_writes,
        "writes_steady": steady_writes,
        "rss_retained_mib": round(after - base, 1),
        "bytes_per_device": round((after - base) * 2**20 / devices),
    }
    if seconds > 0:
        before = w.total()
        result["churn"] = loop.run_until_complete(churn(ctl, w, n, rate, seconds, interval))
        result["churn"]["writes"] = w.total() - before
    result["peak_mib"] = round(peak_mib(), 1)
    return result


def curve(sizes: list[int], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        print(f"== {n} nodes", file=sys.stderr, flush=True)
        cmd = [
            sys.executable,
            __file__,
            "--nodes",
            str(n),
            "--rate",
            str(args.rate),
            "--seconds",
            str(args.seconds),
            "--batch-interval",
            str(args.batch_interval),
        ]
        if args.claim_events:
            cmd += ["--claim-events", "--explain-interval", str(args.explain_interval)]
        if not args.classes:
            cmd.append("--no-classes")
        out = subprocess.run(cmd, check=True, capture_output=False, stdout=subprocess.PIPE)
        rows.append(json.loads(out.stdout))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "NODES",
        "DEVICES",
        "CLAIMS",
        "1ST-JUDGEMENT-CPU",
        "PEAK-RSS",
        "RETAINED",
        "B/DEVICE",
        "STEADY-WRITES",
        "CHURN-P95",
        "CPU/CHANGE",
    )
    lines = [head]
    for r in rows:
        c = r.get("churn", {})
        lines.append(
            (
                str(r["nodes"]),
                str(r["devices"]),
                str(r["claims"]),
                f"{r['first_judgement_cpu_s']} s",
                f"{r['peak_mib']} MiB",
                f"{r['rss_retained_mib']} MiB",
                str(r["bytes_per_device"]),
                str(r["writes_steady"]),
                f"{c.get('p95_s', '-')} s",
                f"{c.get('cpu_per_change_ms', '-')} ms",
            )
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join(
        "   ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in lines
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--nodes", type=int, default=65_000)
    p.add_argument("--curve", help="comma-separated sizes, each run in its own process")
    p.add_argument("--rate", type=float, default=200.0, help="claim changes per second")
    p.add_argument("--seconds", type=float, default=30.0, help="churn duration (0: none)")
    p.add_argument("--batch-interval", type=float, default=0.25)
    p.add_argument(
        "--claim-events", action="store_true", help="explain pending claims during the churn"
    )
    p.add_argument("--explain-interval", type=float, default=10.0, help="seconds between rounds")
    p.add_argument("--no-classes", dest="classes", action="store_false", help="list no DeviceClass")
    p.add_argument("--json", type=Path, help="write the results here too")
    args = p.parse_args()
    if args.curve:
        rows = curve([int(s) for s in args.curve.split(",")], args)
        print(table(rows))
        out: Any = rows
    else:
        explain = args.explain_interval if args.claim_events else None
        out = run(args.nodes, args.rate, args.seconds, args.batch_interval, explain, args.classes)
        print(json.dumps(out, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
