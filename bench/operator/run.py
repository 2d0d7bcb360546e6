"""Operator benchmark against a real API server (bench/operator/README.md).

Phases:

1. create S ResourceSlices (one per fake node `node-bench-N`, one pool per slice, D GPUs
   each with realistic attributes) and C ResourceClaims spread over 20 namespaces, each
   allocated to one distinct device by a merge patch on the status subresource (claim j
   takes device j // S of slice j % S, so no device is ever allocated twice);
2. start `draview run` with default settings and measure the time until every pool's
   ResourcePoolStatus shows its expected allocated count (watched), plus peak RSS;
3. steady state: `draview_api_writes_total` must not move over a window;
4. claim churn: N changes spaced `--spacing` apart (allocate a new claim on a free device
   or delete an allocated claim), each timestamped when its API call returns; a watch on
   ResourceSliceStatuses (started before the churn) timestamps when the device's state
   flips. Latency percentiles and writes per change.

    eval "$(e2e/cluster/up)"
    python bench/operator/run.py --slices 1000 --claims 10000 --json bench/out/op-1k.json

Each device changes at most once during the churn (freed devices are not reused, new
claims are never deleted), so every change has exactly one expected flip.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import functools
import json
import math
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

ROOT = Path(__file__).resolve().parents[2]
DRIVER = "gpu.bench.draview.io"
CLASS = "bench-gpu"
NS_PREFIX = "draview-bench-"
NAMESPACES = 20
RES = ("resource.k8s.io", "v1")
OURS = ("draview.io", "v1alpha1")
MERGE = "application/merge-patch+json"
BENCH_LABEL = "bench.draview.io/run"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the world -----------------------------------------------------------------------
def node_name(i: int) -> str:
    return f"node-bench-{i:05d}"


def slice_name(i: int) -> str:
    return f"{node_name(i)}-gpus"


def claim_ref(j: int) -> tuple[str, str]:
    return f"{NS_PREFIX}{j % NAMESPACES:02d}", f"bench-claim-{j:06d}"


def device(i: int, d: int) -> dict[str, Any]:
    bus = 0x18 + d * 0x10
    return {
        "name": f"gpu-{d}",
        "attributes": {
            "index": {"int": d},
            "uuid": {"string": f"GPU-{i:08x}-{d:04x}-4b7e-9c1d-{(i * 16 + d):012x}"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"},
            "driverVersion": {"version": "550.54.15"},
            "cudaDriverVersion": {"version": "12.4.0"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "pciBusID": {"string": f"0000:{bus & 0xFF:02x}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{(bus & 0xF0):02x}"},
            "numaNode": {"int": d * 2 // 8},
        },
        "capacity": {
            "memory": {"value": "80Gi"},
            "multiprocessors": {"value": "132"},
        },
    }


def slice_obj(i: int, per_slice: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(i), "labels": {BENCH_LABEL: "1"}},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name(i),
            "pool": {"name": node_name(i), "generation": 1, "resourceSliceCount": 1},
            "devices": [device(i, d) for d in range(per_slice)],
        },
    }


def claim_obj(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "labels": {BENCH_LABEL: "1"}},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": CLASS,
                            "allocationMode": "ExactCount",
                            "count": 1,
                        },
                    }
                ]
            }
        },
    }


def allocation_patch(i: int, dev: str) -> dict[str, Any]:
    return {
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": node_name(i), "device": dev}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node_name(i)]}
                            ]
                        }
                    ]
                },
            }
        }
    }


@dataclass
class World:
    slices: int
    claims: int
    per_slice: int

    def device_of(self, j: int) -> tuple[int, int]:
        return j % self.slices, j // self.slices


# -- API helpers ---------------------------------------------------------------------
class Kube:
    def __init__(self, api: client.ApiClient, concurrency: int) -> None:
        self.api = api
        self.co = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.sem = asyncio.Semaphore(concurrency)
        self.requests = 0

    async def call(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kw: Any) -> Any:
        delay = 0.2
        for attempt in range(8):
            async with self.sem:
                try:
                    out = await fn(*args, **kw)
                    self.requests += 1
                    return out
                except ApiException as exc:
                    if exc.status not in (429, 500, 502, 503, 504) or attempt == 7:
                        raise
                except (aiohttp.ClientError, TimeoutError, OSError):
                    if attempt == 7:
                        raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5)
        raise RuntimeError("unreachable")

    async def create_claim(self, ns: str, name: str, i: int, dev: str) -> float:
        """Create and allocate; returns when the status patch returned (monotonic)."""
        try:
            await self.call(
                self.co.create_namespaced_custom_object,
                *RES,
                ns,
                "resourceclaims",
                claim_obj(ns, name),
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
        await self.call(
            self.co.patch_namespaced_custom_object_status,
            *RES,
            ns,
            "resourceclaims",
            name,
            allocation_patch(i, dev),
            _content_type=MERGE,
        )
        return time.monotonic()


async def gather_bounded(coros: list[Awaitable[Any]], what: str, every: int = 5000) -> None:
    """Run coroutines (the Kube semaphore bounds concurrency) with progress logging."""
    t0 = time.monotonic()
    pending = [asyncio.ensure_future(c) for c in coros]
    for done, fut in enumerate(asyncio.as_completed(pending), 1):
        await fut
        if done % every == 0 or done == len(pending):
            log(f"{what}: {done}/{len(pending)} in {time.monotonic() - t0:.1f}s")


async def create_world(k: Kube, w: World) -> dict[str, float]:
    t0 = time.monotonic()
    for n in range(NAMESPACES):
        body = {"metadata": {"name": f"{NS_PREFIX}{n:02d}", "labels": {BENCH_LABEL: "1"}}}
        with contextlib.suppress(ApiException):
            await k.core.create_namespace(body)  # type: ignore[arg-type]
    dc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": CLASS},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
    }
    with contextlib.suppress(ApiException):
        await k.co.create_cluster_custom_object(*RES, "deviceclasses", dc)

    async def mk_slice(i: int) -> None:
        try:
            await k.call(
                k.co.create_cluster_custom_object, *RES, "resourceslices", slice_obj(i, w.per_slice)
            )
        except ApiException as exc:
            if exc.status != 409:
                raise

    await gather_bounded([mk_slice(i) for i in range(w.slices)], "slices", every=1000)
    t_slices = time.monotonic() - t0

    async def mk_claim(j: int) -> None:
        ns, name = claim_ref(j)
        i, d = w.device_of(j)
        await k.create_claim(ns, name, i, f"gpu-{d}")

    # In chunks so that the task list stays small at 50k.
    chunk = 5000
    t1 = time.monotonic()
    for start in range(0, w.claims, chunk):
        await gather_bounded(
            [mk_claim(j) for j in range(start, min(w.claims, start + chunk))],
            f"claims {start}+",
            every=chunk,
        )
    t_claims = time.monotonic() - t1
    writes = w.slices + 2 * w.claims
    return {
        "slices_seconds": round(t_slices, 1),
        "claims_seconds": round(t_claims, 1),
        "writes_per_second": round(writes / (time.monotonic() - t0), 1),
    }


async def ensure_crds(k: Kube) -> None:
    """Install draview's CRDs (deploy/crds) when the control plane has none yet: a fresh
    `e2e/cluster/up` serves no draview.io kinds."""
    ext = client.ApiextensionsV1Api(k.api)
    for f in sorted((ROOT / "deploy" / "crds").glob("draview.io_*.yaml")):
        crd = yaml.safe_load(f.read_text())
        try:
            await ext.read_custom_resource_definition(crd["metadata"]["name"])
            continue
        except ApiException as e:
            if e.status != 404:
                raise
        log(f"installing CRD {crd['metadata']['name']}")
        await ext.create_custom_resource_definition(crd)
    for f in sorted((ROOT / "deploy" / "crds").glob("draview.io_*.yaml")):
        name = yaml.safe_load(f.read_text())["metadata"]["name"]
        for _ in range(120):
            got = await ext.read_custom_resource_definition(name)
            conds = {c.type: c.status for c in (got.status.conditions or [])}
            if conds.get("Established") == "True":
                break
            await asyncio.sleep(0.5)


async def delete_status_objects(k: Kube) -> None:
    for plural in ("resourceslicestatuses", "resourcepoolstatuses"):
        with contextlib.suppress(ApiException):
            await k.co.delete_collection_cluster_custom_object(*OURS, plural)
    # Wait until they are gone (deletecollection is synchronous for CRs without finalizers).
    for _ in range(120):
        n = 0
        for plural in ("resourceslicestatuses", "resourcepoolstatuses"):
            lst = await k.co.list_cluster_custom_object(*OURS, plural, limit=1)
            n += len(lst.get("items", []))
        if n == 0:
            return
        await asyncio.sleep(1)


async def delete_world(k: Kube) -> None:
    log("cleanup: deleting claims, slices, status objects, namespaces")
    for n in range(NAMESPACES):
        with contextlib.suppress(ApiException):
            await k.co.delete_collection_namespaced_custom_object(
                *RES, f"{NS_PREFIX}{n:02d}", "resourceclaims"
            )
    with contextlib.suppress(ApiException):
        await k.co.delete_collection_cluster_custom_object(
            *RES, "resourceslices", label_selector=BENCH_LABEL
        )
    await delete_status_objects(k)
    for n in range(NAMESPACES):
        with contextlib.suppress(ApiException):
            await k.core.delete_namespace(f"{NS_PREFIX}{n:02d}")
    with contextlib.suppress(ApiException):
        await k.co.delete_cluster_custom_object(*RES, "deviceclasses", CLASS)


async def actual_allocations(k: Kube, w: World) -> dict[tuple[int, int], tuple[str, str]]:
    """(slice index, device index) -> (namespace, name) of the claim allocated to it, from
    the API server: the truth after an earlier --keep run's churn."""
    index = {node_name(i): i for i in range(w.slices)}
    out: dict[tuple[int, int], tuple[str, str]] = {}
    for n in range(NAMESPACES):
        ns = f"{NS_PREFIX}{n:02d}"
        cont = None
        while True:
            kw: dict[str, Any] = {"limit": 1000}
            if cont:
                kw["_continue"] = cont
            lst = await k.co.list_namespaced_custom_object(*RES, ns, "resourceclaims", **kw)
            for c in lst.get("items", []):
                alloc = (c.get("status") or {}).get("allocation") or {}
                for r in (alloc.get("devices") or {}).get("results") or []:
                    i = index.get(r.get("pool"))
                    if r.get("driver") == DRIVER and i is not None:
                        d = int(str(r["device"]).removeprefix("gpu-"))
                        if (i, d) in out:
                            raise RuntimeError(f"device allocated twice: {r}")
                        out[(i, d)] = (ns, c["metadata"]["name"])
            cont = lst["metadata"].get("continue")
            if not cont:
                break
    return out


# -- watching our objects --------------------------------------------------------------
class Watcher:
    """Watch one plural of draview objects from a resourceVersion, re-watching on end."""

    def __init__(
        self, k: Kube, plural: str, rv: str, on_event: Callable[[str, dict[str, Any]], None]
    ) -> None:
        self.k, self.plural, self.rv, self.on_event = k, plural, rv, on_event
        self.task: asyncio.Task[None] | None = None
        self.events = 0

    def start(self) -> Watcher:
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            w = watch.Watch()
            try:
                async for ev in w.stream(
                    self.k.co.list_cluster_custom_object,
                    *OURS,
                    self.plural,
                    resource_version=self.rv,
                    allow_watch_bookmarks=True,
                    timeout_seconds=600,
                    _request_timeout=700,
                ):
                    obj = ev["object"]
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        self.rv = rv
                    if ev["type"] == "BOOKMARK":
                        continue
                    self.events += 1
                    self.on_event(ev["type"], obj)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # re-watch from the last version seen
                log(f"watch {self.plural} restarted: {exc!r}")
                await asyncio.sleep(0.5)
            finally:
                await w.close()

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


# -- the operator process ----------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Operator:
    kubeconfig: str
    log_path: Path
    profile: str | None = None
    extra: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    scrapes: list[float] = field(default_factory=list)  # /metrics response times

    def start(self) -> None:
        py = [sys.executable]
        if self.profile:
            py += ["-m", "cProfile", "-o", self.profile]
        cmd = [
            *py,
            "-m",
            "draview.cli.main",
            "run",
            "--leader-elect",
            "false",
            "--port",
            str(self.port),
            "--log-format",
            "text",
            *self.extra,
        ]
        log(f"operator: {' '.join(cmd[1:])}")
        env = {**os.environ, "KUBECONFIG": self.kubeconfig}
        # A restart appends: the log of the process before it is what explains its writes.
        with open(self.log_path, "ab" if self.proc is not None else "wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent
            )
        self.started = time.monotonic()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def mem(self) -> dict[str, float]:
        """VmHWM (peak) and VmRSS in MiB."""
        out: dict[str, float] = {}
        assert self.proc is not None
        with contextlib.suppress(OSError), open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    out[key] = round(int(val.split()[0]) / 1024, 1)
        return out

    def cpu(self) -> float | None:
        """User + system CPU seconds the operator used so far."""
        assert self.proc is not None
        seconds = cpu_seconds(self.proc.pid)
        return None if seconds is None else round(seconds, 2)

    async def get(
        self, session: aiohttp.ClientSession, path: str, limit: float = 5
    ) -> tuple[int, str]:
        try:
            async with session.get(
                f"http://127.0.0.1:{self.port}{path}", timeout=aiohttp.ClientTimeout(total=limit)
            ) as r:
                return r.status, await r.text()
        except (aiohttp.ClientError, TimeoutError, OSError):
            return 0, ""

    async def metrics(self, session: aiohttp.ClientSession) -> dict[str, float]:
        """Parsed /metrics. The operator renders it inside its event loop, so a scrape can
        take seconds while the loop is busy: retry with a long timeout, never return an
        empty result (a missing counter would read as 0 writes)."""
        # 30 tries: on a loaded machine the operator's port opens seconds after start.
        for _ in range(30):
            t0 = time.monotonic()
            code, text = await self.get(session, "/metrics", limit=60)
            if code == 200 and text:
                self.scrapes.append(time.monotonic() - t0)
                break
            await asyncio.sleep(1)
        else:
            raise RuntimeError("operator /metrics did not answer")
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("#") or not line:
                continue
            head, _, value = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                out[head] = float(value)
        return out

    def stop(self) -> int | None:
        if not self.alive():
            return self.proc.returncode if self.proc else None
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _die_with_parent() -> None:
    """In the operator's process before it runs: SIGTERM it when the bench exits, however
    the bench ends (a bench killed mid-run once left its operator writing into the next
    run's world)."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process used so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def processes_cpu(pids: dict[str, int]) -> dict[str, float | None]:
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def cpu_since(before: dict[str, float | None], pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds each process used since `before` (processes_cpu), to 0.1 s."""
    return {
        name: round(now - then, 1)
        for name, now in processes_cpu(pids).items()
        if now is not None and (then := before.get(name)) is not None
    }


def control_plane_pids(kubeconfig: str) -> dict[str, int]:
    """The local control plane's processes: e2e/cluster writes their pid files next to
    the kubeconfig. Empty for any other cluster."""
    out: dict[str, int] = {}
    for f in sorted((Path(kubeconfig).resolve().parent / "pids").glob("*.pid")):
        with contextlib.suppress(OSError, ValueError):
            out[f.stem] = int(f.read_text().strip())
    return out


def calibrate() -> float:
    """Seconds of a fixed CPU-bound workload of the operator's kind (JSON round trips of
    slice-like documents), the best of three, on the idle machine just before the
    operator starts. This machine's speed has varied by 1.6x within a day; figures
    from different runs compare as ratios to this one."""
    doc = [
        {"name": f"gpu-{i}", "attributes": {"uuid": {"string": f"GPU-{i:08x}"}, "n": {"int": i}}}
        for i in range(20_000)
    ]
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(5):
            json.loads(json.dumps(doc))
        best = min(best, time.perf_counter() - t0)
    return round(best, 3)


def metric_sum(m: dict[str, float], name: str) -> float:
    return sum(v for k, v in m.items() if k.split("{")[0] == name)


def writes_by_label(m: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in m.items() if k.startswith("draview_api_writes_total{")}


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    idx = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[idx]


# -- phases ------------------------------------------------------------------------------
async def converge(
    k: Kube,
    op: Operator,
    session: aiohttp.ClientSession,
    w: World,
    allocs: dict[tuple[int, int], tuple[str, str]],
    limit: float,
    scrape_interval: float = 30.0,
) -> dict[str, Any]:
    expected = {node_name(i): 0 for i in range(w.slices)}
    for i, _ in allocs:
        expected[node_name(i)] += 1
    seen: dict[str, int | None] = {}
    matched: set[str] = set()
    first_seen: list[float] = []

    def on_pool(kind: str, obj: dict[str, Any]) -> None:
        pool = (obj.get("spec") or {}).get("pool")
        if pool not in expected:
            return
        if not first_seen:
            first_seen.append(time.monotonic())
        if kind == "DELETED":
            matched.discard(pool)
            return
        n = ((obj.get("status") or {}).get("summary") or {}).get("allocatedDevices")
        seen[pool] = n
        if n == expected[pool]:
            matched.add(pool)
        else:
            matched.discard(pool)

    lst = await k.co.list_cluster_custom_object(*OURS, "resourcepoolstatuses", limit=1)
    watcher = Watcher(k, "resourcepoolstatuses", lst["metadata"]["resourceVersion"], on_pool)
    watcher.start()
    await asyncio.sleep(0.5)
    op.start()
    ready_at = None
    converged_at = None
    last_log = 0.0
    peak_during = 0.0
    try:
        while time.monotonic() - op.started < limit:
            if not op.alive():
                raise RuntimeError(f"operator exited: see {op.log_path}")
            now = time.monotonic()
            if ready_at is None and (await op.get(session, "/readyz"))[0] == 200:
                ready_at = now
            peak_during = max(peak_during, op.mem().get("VmHWM", 0.0))
            if len(matched) == len(expected):
                converged_at = now
                break
            # Progress reads /metrics, which costs the operator ~0.5 s of CPU at 5,000
            # pools: scrape as often as a Prometheus would, not more.
            if now - last_log > scrape_interval:
                last_log = now
                m = await op.metrics(session)
                log(
                    f"converging: {len(matched)}/{len(expected)} pools, "
                    f"{len(seen)} seen, writes={metric_sum(m, 'draview_api_writes_total'):.0f}, "
                    f"mem={op.mem()}"
                )
            await asyncio.sleep(0.1)
    finally:
        await watcher.stop()
    m = await op.metrics(session)
    mem = op.mem()
    out = {
        "converged": converged_at is not None,
        "convergence_seconds": None
        if converged_at is None
        else round(converged_at - op.started, 2),
        "first_pool_status_seconds": round(first_seen[0] - op.started, 2) if first_seen else None,
        "ready_seconds": None if ready_at is None else round(ready_at - op.started, 2),
        "pools_matched": len(matched),
        "pools_expected": len(expected),
        "writes_at_convergence": metric_sum(m, "draview_api_writes_total"),
        "writes_by_label": writes_by_label(m),
        "peak_rss_mib": mem.get("VmHWM"),
        "rss_mib": mem.get("VmRSS"),
        "operator_cpu_seconds": op.cpu(),
    }
    # readiness may follow convergence (full_sync returns after the last write)
    if ready_at is None:
        t_end = time.monotonic() + 60
        while time.monotonic() < t_end:
            if (await op.get(session, "/readyz"))[0] == 200:
                out["ready_seconds"] = round(time.monotonic() - op.started, 2)
                break
            await asyncio.sleep(0.2)
    return out


async def steady(
    op: Operator, session: aiohttp.ClientSession, settle: float, window: float
) -> dict[str, Any]:
    m0 = await op.metrics(session)
    c0 = op.cpu()
    await asyncio.sleep(settle)
    m1 = await op.metrics(session)
    c1 = op.cpu()
    await asyncio.sleep(window)
    m2 = await op.metrics(session)
    c2 = op.cpu()
    w0, w1, w2 = (metric_sum(x, "draview_api_writes_total") for x in (m0, m1, m2))
    return {
        "settle_seconds": settle,
        "writes_during_settle": w1 - w0,
        "window_seconds": window,
        "writes_in_window": w2 - w1,
        "writes_total": w2,
        # CPU the operator burns after its initial sync: kopf's own initial listing
        "cpu_seconds_during_settle": round((c1 or 0) - (c0 or 0), 2),
        "cpu_seconds_in_window": round((c2 or 0) - (c1 or 0), 2),
        "rss_mib": op.mem().get("VmRSS"),
        "peak_rss_mib": op.mem().get("VmHWM"),
    }


@dataclass
class Change:
    idx: int
    kind: str  # allocate | delete
    slice: str
    device: str
    want: str  # Allocated | Available
    sent: float = 0.0
    returned: float | None = None
    seen: float | None = None


async def churn(
    k: Kube,
    op: Operator,
    session: aiohttp.ClientSession,
    w: World,
    allocs: dict[tuple[int, int], tuple[str, str]],
    n: int,
    spacing: float,
    seed: int,
    wait_seconds: float,
) -> dict[str, Any]:
    rng = random.Random(seed)
    free = [(i, d) for i in range(w.slices) for d in range(w.per_slice) if (i, d) not in allocs]
    rng.shuffle(free)
    candidates = sorted(allocs)
    rng.shuffle(candidates)
    run_id = f"{int(time.time()) % 1000000:06d}"

    pending: dict[tuple[str, str], Change] = {}
    states: dict[tuple[str, str], str] = {}
    all_seen = asyncio.Event()
    unseen = [n]

    def on_slice(kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            return
        name = obj["metadata"]["name"]
        now = time.monotonic()
        for dev in (obj.get("status") or {}).get("devices") or []:
            key = (name, dev.get("name"))
            states[key] = dev.get("state")
            ch = pending.get(key)
            if ch is not None and ch.seen is None and dev.get("state") == ch.want and ch.sent:
                ch.seen = now
                unseen[0] -= 1
                if unseen[0] == 0:
                    all_seen.set()

    # The starting state: a list, then the watch from its resourceVersion.
    lst_rv = None
    cont = None
    while True:
        kw: dict[str, Any] = {"limit": 500}
        if cont:
            kw["_continue"] = cont
        lst = await k.co.list_cluster_custom_object(*OURS, "resourceslicestatuses", **kw)
        lst_rv = lst_rv or lst["metadata"]["resourceVersion"]
        for obj in lst.get("items", []):
            on_slice("ADDED", obj)
        cont = lst["metadata"].get("continue")
        if not cont:
            break
    watcher = Watcher(k, "resourceslicestatuses", lst_rv, on_slice).start()
    await asyncio.sleep(1.0)
    m0 = await op.metrics(session)
    c0 = op.cpu()
    changes: list[Change] = []
    tasks = []

    async def do(ch: Change, fn: Callable[[], Awaitable[Any]]) -> None:
        ch.sent = time.monotonic()
        await fn()
        ch.returned = time.monotonic()

    t_start = time.monotonic()
    for idx in range(n):
        # keep a fixed cadence: launch change idx at t_start + idx * spacing
        delay = t_start + idx * spacing - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        alloc = free and (rng.random() < 0.5 or not candidates)
        if alloc:
            i, d = free.pop()
            ns = f"{NS_PREFIX}{idx % NAMESPACES:02d}"
            name = f"bench-churn-{run_id}-{idx:05d}"
            ch = Change(idx, "allocate", slice_name(i), f"gpu-{d}", "Allocated")
            fn: Callable[[], Awaitable[Any]] = functools.partial(
                k.create_claim, ns, name, i, f"gpu-{d}"
            )
        else:
            i, d = candidates.pop()
            ns, name = allocs[(i, d)]
            ch = Change(idx, "delete", slice_name(i), f"gpu-{d}", "Available")
            fn = functools.partial(
                k.call, k.co.delete_namespaced_custom_object, *RES, ns, "resourceclaims", name
            )

        pending[(ch.slice, ch.device)] = ch
        changes.append(ch)
        tasks.append(asyncio.create_task(do(ch, fn)))
    await asyncio.gather(*tasks)
    t_sent = time.monotonic() - t_start
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(all_seen.wait(), wait_seconds)
    await asyncio.sleep(2.0)  # let trailing writes land before reading the counter
    m1 = await op.metrics(session)
    await watcher.stop()
    lat = []
    early = 0
    for c in changes:
        if c.seen is None or c.returned is None:
            continue
        dt = c.seen - c.returned
        if dt < 0:
            early += 1
        lat.append(max(0.0, dt))
    writes = metric_sum(m1, "draview_api_writes_total") - metric_sum(m0, "draview_api_writes_total")
    hist_c = metric_sum(m1, "dra_resourceslice_status_update_duration_seconds_count") - metric_sum(
        m0, "dra_resourceslice_status_update_duration_seconds_count"
    )
    hist_s = metric_sum(m1, "dra_resourceslice_status_update_duration_seconds_sum") - metric_sum(
        m0, "dra_resourceslice_status_update_duration_seconds_sum"
    )
    return {
        "changes": len(changes),
        "allocations": sum(c.kind == "allocate" for c in changes),
        "deletions": sum(c.kind == "delete" for c in changes),
        "spacing_seconds": spacing,
        "send_seconds": round(t_sent, 2),
        "seen": len(lat),
        "not_seen": sum(c.seen is None for c in changes),
        "seen_before_call_returned": early,
        "latency_p50": round(pct(lat, 50), 3),
        "latency_p95": round(pct(lat, 95), 3),
        "latency_p99": round(pct(lat, 99), 3),
        "latency_max": round(max(lat), 3) if lat else None,
        "latency_mean": round(statistics.fmean(lat), 3) if lat else None,
        "api_call_p50": round(pct([c.returned - c.sent for c in changes if c.returned], 50), 3),
        "writes": writes,
        "writes_per_change": round(writes / max(1, len(changes)), 3),
        "writes_by_label_delta": {
            key: v - writes_by_label(m0).get(key, 0.0) for key, v in writes_by_label(m1).items()
        },
        "operator_batches": hist_c,
        "operator_update_duration_mean": round(hist_s / hist_c, 3) if hist_c else None,
        "watch_events": watcher.events,
        "operator_cpu_seconds": round((op.cpu() or 0) - (c0 or 0), 2),
    }


# -- main --------------------------------------------------------------------------------
def write_rate(extra: list[str]) -> tuple[float, int]:
    """The --qps and --burst the operator runs with (its defaults unless given)."""
    from draview.cli.settings import RunSettings

    rate = {"qps": float(RunSettings.model_fields["qps"].default)}
    rate["burst"] = float(RunSettings.model_fields["burst"].default)
    for arg in extra:
        name, _, value = arg.lstrip("-").partition("=")
        if name in rate and value:
            rate[name] = float(value)
    return rate["qps"], int(rate["burst"])


def write_floor(conv: dict[str, Any], extra: list[str]) -> dict[str, Any]:
    """The write floor: the shortest convergence --qps/--burst allow for the writes it
    took (the burst goes at once, the rest at qps), and the measured time over it."""
    qps, burst = write_rate(extra)
    floor = max(0.0, conv["writes_at_convergence"] - burst) / qps
    out = {"qps": qps, "burst": burst, "write_floor_seconds": round(floor, 1)}
    if conv.get("convergence_seconds") and floor:
        out["convergence_over_floor"] = round(conv["convergence_seconds"] / floor, 2)
    return out


async def drained(op: Operator, session: aiohttp.ClientSession, limit: float) -> dict[str, Any]:
    """Wait until the operator has written everything it judged: no pool queued, no
    object waiting or in flight at the writer, and the write counter still for three
    scrapes in a row. Stopping it earlier would leave writes for its successor, which
    would then not be the restart's own."""
    t0 = time.monotonic()
    last, still = -1.0, 0
    while time.monotonic() - t0 < limit:
        m = await op.metrics(session)
        writes = metric_sum(m, "draview_api_writes_total")
        idle = (
            metric_sum(m, "workqueue_depth") == 0 and metric_sum(m, "draview_writes_pending") == 0
        )
        still = still + 1 if idle and writes == last else 0
        last = writes
        if still >= 3:
            return {"drained": True, "seconds": round(time.monotonic() - t0, 1), "writes": writes}
        await asyncio.sleep(1)
    return {"drained": False, "seconds": round(time.monotonic() - t0, 1), "writes": last}


async def our_objects(k: Kube) -> dict[tuple[str, str], tuple[str, str]]:
    """(plural, name) -> (resourceVersion, status as JSON) of every draview object."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for plural in ("resourceslicestatuses", "resourcepoolstatuses"):
        cont = None
        while True:
            kw: dict[str, Any] = {"limit": 2000}
            if cont:
                kw["_continue"] = cont
            lst = await k.co.list_cluster_custom_object(*OURS, plural, **kw)
            for o in lst.get("items", []):
                md = o["metadata"]
                out[(plural, md["name"])] = (
                    md["resourceVersion"],
                    json.dumps(o.get("status"), sort_keys=True),
                )
            cont = lst["metadata"].get("continue")
            if not cont:
                break
    return out


def differences(a: Any, b: Any, path: str = "status") -> list[str]:
    """Paths where two JSON values differ, with both values (short)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += differences(a.get(key), b.get(key), f"{path}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: {json.dumps(a)[:200]} -> {json.dumps(b)[:200]}"]


async def restart(
    k: Kube,
    op: Operator,
    session: aiohttp.ClientSession,
    settle: float,
    window: float,
    limit: float,
) -> dict[str, Any]:
    """Stop the operator once it has written everything, and start it again on the
    unchanged world: the new process must recognise every object it finds as what it
    would write, and write nothing. Objects it rewrote anyway are listed with what
    changed in them."""
    drain = await drained(op, session, limit)
    # What the process before the restart went through: failed writes (by kind and
    # code) and objects it read back because such a write may have landed.
    m = await op.metrics(session)
    drain["failed_writes"] = {
        k: v for k, v in m.items() if k.startswith("dra_resourceslice_status_update_errors_total{")
    }
    drain["rereads"] = metric_sum(m, "draview_api_rereads_total")
    log(f"drained before the restart: {drain}")
    before = await our_objects(k)
    op.stop()
    op.scrapes.clear()
    op.start()
    ready = None
    while time.monotonic() - op.started < limit:
        if not op.alive():
            raise RuntimeError(f"operator exited after restart: see {op.log_path}")
        if (await op.get(session, "/readyz"))[0] == 200:
            ready = round(time.monotonic() - op.started, 2)
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(settle + window)
    m = await op.metrics(session)
    after = await our_objects(k)
    changed = sorted(key for key, (rv, _) in after.items() if before.get(key, ("",))[0] != rv)
    examples = {
        f"{plural}/{name}": differences(
            json.loads(before[(plural, name)][1]) if (plural, name) in before else None,
            json.loads(after[(plural, name)][1]),
        )[:10]
        for plural, name in changed[:5]
    }
    return {
        "drained_before": drain,
        "ready_seconds": ready,
        "writes": metric_sum(m, "draview_api_writes_total"),
        "writes_by_label": writes_by_label(m),
        "objects_changed": len(changed),
        "changed_examples": examples,
        "after_ready_seconds": settle + window,
        "peak_rss_mib": op.mem().get("VmHWM"),
        "operator_cpu_seconds": op.cpu(),
    }


def targets(res: dict[str, Any], big: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    st = res.get("steady")
    if st:
        out["steady_zero_writes"] = st["writes_in_window"] == 0
    ch = res.get("churn")
    if ch:
        out["churn_p95_le_1s"] = ch["not_seen"] == 0 and ch["latency_p95"] <= 1.0
        # Only meaningful when every change was processed.
        out["churn_writes_per_change_le_2"] = ch["not_seen"] == 0 and ch["writes_per_change"] <= 2
    cv = res.get("convergence")
    if cv and big:
        out["converged_le_1.3x_write_floor"] = (
            bool(cv["converged"]) and (cv.get("convergence_over_floor") or 99) <= 1.3
        )
        out["peak_rss_le_1GiB"] = (res.get("final_peak_rss_mib") or 0) <= 1024
    rs = res.get("restart")
    if rs:
        out["restart_zero_writes"] = rs["ready_seconds"] is not None and rs["writes"] == 0
    return out


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG")
    if not kubeconfig:
        sys.exit('set KUBECONFIG or --kubeconfig (eval "$(e2e/cluster/up)")')
    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    cfg.connection_pool_maxsize = max(args.concurrency + 8, 32)
    api = client.ApiClient(cfg)
    k = Kube(api, args.concurrency)
    await ensure_crds(k)
    per_slice = args.devices_per_slice or max(8, math.ceil(1.2 * args.claims / args.slices))
    w = World(args.slices, args.claims, per_slice)
    if args.claims > w.slices * w.per_slice:
        sys.exit("more claims than devices")
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "slices": w.slices,
        "claims": w.claims,
        "devices_per_slice": w.per_slice,
        "devices": w.slices * w.per_slice,
        "cpus": os.cpu_count(),
        "command": " ".join(sys.argv),
    }
    op = Operator(
        kubeconfig,
        Path(args.log_dir) / f"operator-{w.slices}.log",
        args.profile,
        args.operator_arg or [],
    )
    try:
        if args.reuse:
            log("reusing existing objects (created by an earlier --keep run)")
        else:
            log(f"creating {w.slices} slices x {w.per_slice} devices, {w.claims} claims")
            res["create"] = await create_world(k, w)
            log(f"created: {res['create']}")
        allocs = await actual_allocations(k, w)
        res["allocated_devices"] = len(allocs)
        await delete_status_objects(k)
        res["calibration_seconds"] = calibrate()
        pids = control_plane_pids(kubeconfig)
        cpu0 = processes_cpu(pids)
        async with aiohttp.ClientSession() as session:
            res["convergence"] = conv = await converge(
                k, op, session, w, allocs, args.converge_timeout, args.scrape_interval
            )
            # CPU of each process while the operator converged: on a shared machine the
            # API server's share bounds the operator's write rate.
            conv["control_plane_cpu_seconds"] = cpu_since(cpu0, pids)
            conv.update(write_floor(conv, op.extra))
            if conv["convergence_seconds"] is not None:
                conv["convergence_per_calibration"] = round(
                    conv["convergence_seconds"] / res["calibration_seconds"], 1
                )
            log(f"convergence: {conv}")
            if not args.skip_after:
                res["steady"] = await steady(op, session, args.settle, args.window)
                log(f"steady: {res['steady']}")
                if args.changes:
                    cpu0 = processes_cpu(pids)
                    res["churn"] = await churn(
                        k, op, session, w, allocs, args.changes, args.spacing, args.seed, 60
                    )
                    # The API server's CPU for the churn: the bench's own claim writes
                    # (the same in every run of a seed) and the operator's status writes.
                    res["churn"]["control_plane_cpu_seconds"] = cpu_since(cpu0, pids)
                    log(f"churn: {res['churn']}")
            res["final_peak_rss_mib"] = op.mem().get("VmHWM")
            if args.restart and not args.skip_after:
                res["restart"] = await restart(
                    k, op, session, args.settle, args.window, args.converge_timeout
                )
                log(f"restart: {res['restart']}")
            res["metrics_scrape_seconds"] = {
                "count": len(op.scrapes),
                "p50": round(pct(op.scrapes, 50), 3),
                "max": round(max(op.scrapes), 3) if op.scrapes else None,
            }
    finally:
        rc = op.stop()
        res["operator_exit"] = rc
        if not args.keep:
            await delete_world(k)
        await api.close()
    res["targets"] = targets(res, big=w.slices >= 5000)
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--slices", type=int, default=1000)
    p.add_argument("--claims", type=int, default=10000)
    p.add_argument(
        "--devices-per-slice",
        type=int,
        default=0,
        help="default: max(8, ceil(1.2 * claims / slices)), so churn finds free devices",
    )
    p.add_argument("--changes", type=int, default=200, help="claim changes in the churn (0: none)")
    p.add_argument("--spacing", type=float, default=0.05, help="seconds between changes")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=24, help="concurrent API requests")
    p.add_argument("--settle", type=float, default=5.0, help="seconds after convergence")
    p.add_argument(
        "--scrape-interval",
        type=float,
        default=30.0,
        help="seconds between /metrics reads while converging (default 30, a Prometheus "
        "scrape; each read costs the operator CPU)",
    )
    p.add_argument("--window", type=float, default=15.0, help="steady-state window, seconds")
    p.add_argument("--converge-timeout", type=float, default=900.0)
    p.add_argument("--skip-after", action="store_true", help="stop after convergence")
    p.add_argument(
        "--restart",
        action="store_true",
        help="at the end, restart the operator on the unchanged world and count its writes",
    )
    p.add_argument("--keep", action="store_true", help="do not delete the objects at the end")
    p.add_argument("--reuse", action="store_true", help="objects exist already (--keep run)")
    p.add_argument("--profile", help="run the operator under cProfile, write stats here")
    p.add_argument("--operator-arg", action="append", help="extra `draview run` argument")
    p.add_argument("--kubeconfig")
    p.add_argument("--log-dir", default="/tmp/draview-bench")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    Path(args.log_dir).mkdir(parents=True, exist_ok=True)
    res = asyncio.run(amain(args))
    text = json.dumps(res, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
