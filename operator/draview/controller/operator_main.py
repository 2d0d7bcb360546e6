"""`draview run`: wire our list and watches, kopf, the controller, leader election and the
HTTP port."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import kopf
from kubernetes_asyncio import client

from draview.api.claims import ResourceClaim
from draview.controller import kube, metrics, watch
from draview.controller.core import Controller, Settings
from draview.controller.events import SliceEvent, post_event, post_slice_event
from draview.controller.health import serve
from draview.controller.leader import LeaderElector
from draview.controller.metadata import CoreMetadata
from draview.controller.ratelimit import TokenBucket
from draview.controller.writer import Writer

log = logging.getLogger("draview")


@dataclass(frozen=True)
class RunConfig:
    kubeconfig: str | None
    context: str | None
    settings: Settings
    qps: float
    burst: int
    write_concurrency: int
    resync_interval: float
    bind_address: str
    port: int
    leader_elect: bool
    lease_namespace: str
    lease_name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    # SIGTERM: time to finish pending writes, under the pod's terminationGracePeriodSeconds.
    shutdown_timeout: float = 20.0
    watch_silence_timeout: float = watch.SILENCE_TIMEOUT


# Listed once and then watched by the operator itself (watch.py), from that list's
# version: a kopf watch would list them all again. Nodes first: they are few, and every
# pool that selects nodes is judged from them.
WATCHED = (
    ("node", "nodes"),
    ("slice", "resourceslices"),
    ("claim", "resourceclaims"),
    ("rule", "devicetaintrules"),
)


def _register(registry: kopf.OperatorRegistry, ctl: Controller, versions: dict[str, str]) -> None:
    """Only `on.event`: no handler here ever patches a watched object. kopf watches only
    DeviceClasses (a handful, read by explanations); it lists each watched kind before it
    watches it."""
    handlers = {
        "resourceslices": ctl.slice_event,
        "resourceclaims": ctl.claim_event,
        "devicetaintrules": ctl.taint_rule_event,
        "deviceclasses": ctl.class_event,
    }
    for plural, version in versions.items():
        handler = handlers[plural]

        def make(h: Any) -> Any:
            async def on_event(event: dict[str, Any], **_: Any) -> None:
                h(event.get("type") or "MODIFIED", event["object"])

            return on_event

        kopf.on.event(kube.GROUP, version, plural, registry=registry, id=f"draview-{plural}")(
            make(handler)
        )


async def _until_done(what: str, step: Callable[[], Awaitable[None]]) -> None:
    """Retry a startup step until it succeeds: an API server that is restarting (429
    "storage is (re)initializing", 5xx, refused connections) or CRDs not served yet must
    delay readiness, never crash the operator."""
    delay = 1.0
    while True:
        try:
            await step()
            return
        except client.exceptions.ApiException as exc:
            if exc.status == 404:
                log.error(
                    "draview CRDs are not served; install them with `kubectl apply -k deploy/crds`",
                    extra={"step": what},
                )
            else:
                log.warning(
                    "API request failed",
                    extra={"step": what, "code": exc.status, "reason": exc.reason},
                )
        except (OSError, TimeoutError, aiohttp.ClientError) as exc:
            log.warning("API server unreachable", extra={"step": what, "error": str(exc)})
        await asyncio.sleep(delay)
        delay = min(delay * 2, 30.0)


class _NoDiffBase(kopf.DiffBaseStorage):
    """No diff-base: draview has only `on.event` handlers, which never look at one.

    kopf builds the diff-base essence of every event regardless (a deep copy of the
    object, then another to strip progress fields): measured at 5,000 slices and
    50,000 claims, that was two thirds of kopf's time and the largest single CPU cost
    of the whole operator. With no essence there is nothing to diff, and nothing is
    ever written back to a watched object."""

    def build(self, *, body: Any, extra_fields: Any = None) -> Any:
        return None

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


def _kopf_settings(settings: kopf.OperatorSettings) -> None:
    settings.posting.enabled = False  # no Events about our own handlers
    settings.persistence.diffbase_storage = _NoDiffBase()
    settings.scanning.disabled = True  # resources are resolved once, at start
    # List in pages, as our own re-list does: kopf replays every object at start, and an
    # unpaged list of 50k claims is one response of ~0.5 GiB once decoded.
    settings.watching.chunk_size = 500
    # kopf keeps a worker per object until it has idled this long; at start every object
    # gets one at once. Our handlers are cheap, so let workers go almost at once.
    settings.queueing.idle_timeout = 0.5
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.error_backoffs = [1, 2, 5, 10, 20]


async def run(cfg: RunConfig) -> int:
    api = await kube.connect(cfg.kubeconfig, cfg.context)
    # The identity in every request's user agent: the API server's audit log then names
    # the replica behind each write.
    api.user_agent = f"draview/{cfg.identity}"
    try:
        return await _run(cfg, api)
    finally:
        await api.close()


async def _run(cfg: RunConfig, api: client.ApiClient) -> int:
    missing = await kube.self_check(api, cfg.lease_namespace if cfg.leader_elect else None)
    if missing:
        log.warning(
            "missing permissions; draview will fail where it needs them", extra={"missing": missing}
        )
    versions: dict[str, str] = {}
    for plural in ("resourceslices", "resourceclaims", "devicetaintrules", "deviceclasses"):
        version = await kube.served_version(api, plural)
        if version is None:
            if plural in ("resourceslices", "resourceclaims"):
                log.error("resource.k8s.io serves no %s: is DRA enabled?", plural)
                return 1
            log.info("DeviceTaintRules are not served; only device taints apply")
            continue
        versions[plural] = version
    log.info("watching", extra={"versions": versions})

    elector: LeaderElector | None = None
    writer = Writer(
        client.CustomObjectsApi(api),
        TokenBucket(cfg.qps, cfg.burst),
        concurrency=cfg.write_concurrency,
        # The fence: no write starts unless this replica provably still leads.
        may_write=lambda: elector is None or elector.may_write(),
    )

    async def post(claim: ResourceClaim, message: str) -> None:
        await post_event(
            api,
            claim,
            message,
            instance=cfg.identity,
            api_version=f"{kube.GROUP}/{versions['resourceclaims']}",
        )

    async def post_slice(ev: SliceEvent) -> None:
        slices_version = f"{kube.GROUP}/{versions['resourceslices']}"
        await post_slice_event(api, ev, instance=cfg.identity, api_version=slices_version)

    ctl = Controller(writer, cfg.settings, post, post_slice)
    if {"list nodes.", "watch nodes."} & set(missing):
        log.warning(
            "cannot watch Nodes: pools whose slices select nodes are judged from assumed "
            "nodes, as offline without Nodes (grant get, list and watch on nodes)"
        )
        ctl.nodes_watched = False
    else:
        versions["nodes"] = "v1"
    metrics.NODES_WATCHED.set(int(ctl.nodes_watched))
    listed = False

    def not_ready() -> str | None:
        if not listed:
            return "initial list not finished"
        if writer.blocked:  # e.g. CRDs deleted, RBAC missing: nothing can be written
            return "cannot write status: " + "; ".join(sorted(writer.blocked.values()))
        if ctl.leader and not ctl.synced:
            return "initial status sync not finished"
        return None

    runner = await serve(cfg.bind_address, cfg.port, not_ready)

    custom = client.CustomObjectsApi(api)
    node_meta = CoreMetadata(api)
    list_versions: dict[str, str] = {}  # plural -> resourceVersion of its latest list

    def source(plural: str) -> tuple[Any, str, str]:
        """Who lists and watches a kind: (client, group, version)."""
        if plural == "nodes":
            return node_meta, "", "v1"
        return custom, kube.GROUP, versions[plural]

    async def relist_kind(kind: str, plural: str) -> str:
        """List one kind into the store, prune what it no longer holds; returns the
        list's resourceVersion."""
        before = ctl.known(kind)
        listed: set[str] = set()
        snapshot: dict[str, str] = {}
        lister, group, version = source(plural)
        pages = kube.list_pages(lister, version, plural, group=group, listed=snapshot)
        async for page in pages:
            listed |= ctl.apply_page(kind, page)
        ctl.prune(kind, before, listed)
        return snapshot.get("resourceVersion", "")

    async def relist() -> None:
        for kind, plural in WATCHED:
            if plural in versions:
                list_versions[plural] = await relist_kind(kind, plural)
        ctl.listed()
        if "deviceclasses" in versions:
            classes = await kube.list_all(custom, versions["deviceclasses"], "deviceclasses")
            ctl.store.classes.clear()
            for obj in classes:
                ctl.class_event("ADDED", obj)

    started = time.monotonic()
    # The initial list allocates the bulk of what this process will ever hold, all of
    # it long-lived and acyclic: without the cyclic collector re-walking it as the heap
    # grows, the list of 5,000 slices and 50,000 claims took half as long.
    gc.disable()
    try:
        await _until_done("initial list", relist)
    finally:
        # Then move it out of the collector's generations for good.
        gc.collect()
        gc.freeze()
        gc.enable()
    listed = True
    log.info(
        "initial list done",
        extra={
            "slices": len(ctl.store.slices),
            "claims": len(ctl.store.claims),
            "pools": len(ctl.store.pool_slices),
            "nodes": len(ctl.nodes),
            "seconds": round(time.monotonic() - started, 1),
        },
    )

    sync_task: asyncio.Task[None] | None = None

    async def initial_sync() -> None:
        began = time.monotonic()
        await _until_done("initial status sync", ctl.full_sync)
        log.info(
            "status in sync",
            extra={"pools": len(ctl.results), "seconds": round(time.monotonic() - began, 1)},
        )

    def become_leader() -> None:
        # Only starts the sync: the elector goes on renewing while it runs.
        nonlocal sync_task
        ctl.leader = True
        sync_task = asyncio.create_task(initial_sync(), name="initial-sync")

    def stop_leading() -> None:
        if sync_task is not None:
            sync_task.cancel()
        ctl.step_down()

    if cfg.leader_elect:
        elector = LeaderElector(
            client.CoordinationV1Api(api),
            cfg.lease_namespace,
            cfg.lease_name,
            cfg.identity,
            become_leader,
            stop_leading,
            lease_seconds=cfg.lease_duration,
            renew_deadline=cfg.renew_deadline,
            retry_period=cfg.retry_period,
        )
    else:
        metrics.IS_LEADER.set(1)

    async def resync_loop() -> None:
        while True:
            await asyncio.sleep(cfg.resync_interval)
            try:
                await relist()
                if ctl.leader:
                    await ctl.full_sync()
            except Exception as exc:
                log.warning("periodic re-list failed", extra={"error": str(exc)})

    async def crd_probe_loop() -> None:
        """While a CRD is missing nothing is written; one cheap list every few seconds
        notices it is back, and a full sync then re-creates every object."""
        while True:
            await asyncio.sleep(5)
            if await writer.probe() and ctl.leader:
                await _until_done("status sync after CRDs returned", ctl.full_sync)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    registry = kopf.OperatorRegistry()
    _register(registry, ctl, {p: v for p, v in versions.items() if p == "deviceclasses"})

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        _kopf_settings(settings)

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return kube.kopf_login(api)

    _chain_signals(loop, stop)
    tasks = [
        asyncio.create_task(ctl.run_batches(), name="batches"),
        asyncio.create_task(ctl.run_explanations(), name="explanations"),
        asyncio.create_task(resync_loop(), name="resync"),
        asyncio.create_task(crd_probe_loop(), name="crd-probe"),
        *(
            asyncio.create_task(
                watch.follow(
                    *source(plural),
                    plural,
                    list_versions[plural],
                    ctl.handler(kind),
                    functools.partial(relist_kind, kind, plural),
                    cfg.watch_silence_timeout,
                ),
                name=f"watch-{plural}",
            )
            for kind, plural in WATCHED
            if plural in versions
        ),
        asyncio.create_task(
            kopf.operator(
                registry=registry,
                standalone=True,
                clusterwide=True,
                stop_flag=stop,
            ),
            name="kopf",
        ),
    ]
    # Watches start before the initial sync writes anything, so that changes made during
    # a long first sync are seen at once rather than replayed after it.
    if elector is not None:
        tasks.append(asyncio.create_task(elector.run(), name="leader"))
    else:
        become_leader()
    code = await _wait_for_stop(stop, tasks)
    log.info("stopping")
    await _shutdown(cfg, ctl, elector, tasks, sync_task)
    await runner.cleanup()
    return code


def _chain_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """kopf installs its own SIGTERM/SIGINT handlers when it starts, replacing ours. Chain
    them instead, so that a signal always sets our stop flag too: kopf stopping with the
    flag unset is then certainly kopf failing, not a signal."""
    install = loop.add_signal_handler

    def add(sig: int, callback: Callable[..., object], *args: Any) -> None:
        if sig not in (signal.SIGTERM, signal.SIGINT):
            return install(sig, callback, *args)

        def both(*a: Any) -> None:
            stop.set()
            callback(*a)

        return install(sig, both, *args)

    setattr(loop, "add_signal_handler", add)  # noqa: B010 (a method of this loop only)


async def _wait_for_stop(stop: asyncio.Event, tasks: list[asyncio.Task[Any]]) -> int:
    """Wait for a signal (0) or for any task to end, which none should (1: one clear
    line saying which and why)."""
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    for t in tasks:
        if not t.done():
            continue
        if t.get_name() == "kopf" and stop.is_set() and t.exception() is None:
            continue  # kopf stops by itself once the stop flag is set
        exc = None if t.cancelled() else t.exception()
        metrics.TASK_FAILURES.labels(t.get_name()).inc()
        log.critical(
            "fatal: internal task ended, exiting",
            extra={"task": t.get_name(), "error": repr(exc) if exc else "returned"},
        )
        stop.set()
        return 1
    return 0


async def _shutdown(
    cfg: RunConfig,
    ctl: Controller,
    elector: LeaderElector | None,
    tasks: list[asyncio.Task[Any]],
    sync_task: asyncio.Task[None] | None,
) -> None:
    """Stop new work; pools taken for a batch but not written go back to the dirty set
    (Controller._requeue); flush them within the deadline; then hand the Lease over."""
    # The elector keeps renewing during the flush: without it the fence would close at
    # the renew deadline and cut the flush short.
    keep = ("kopf", "leader")
    running = [t for t in [*tasks, sync_task] if t is not None and t.get_name() not in keep]
    for t in running:
        t.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    try:
        async with asyncio.timeout(cfg.shutdown_timeout):
            while ctl.leader and ctl.dirty and await ctl.flush_due():
                pass
    except TimeoutError:
        log.warning(
            "shutdown deadline passed; the next leader writes the rest",
            extra={"pools": len(ctl.dirty)},
        )
    for t in tasks:
        if t.get_name() == "leader":
            t.cancel()
            await asyncio.gather(t, return_exceptions=True)
    if elector is not None:
        await elector.release()
    kopf_task = next(t for t in tasks if t.get_name() == "kopf")
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.wait_for(kopf_task, 5)  # all of it within the pod's grace period
