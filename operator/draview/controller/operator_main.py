"""`draview run`, the composition root: build the parts, start them, stop them.

The parts, each in its own file: informers (informers.py) fill the store through ingest
(ingest.py) and mark pools on the queue (queue.py); the worker (worker.py) judges them
(reconcile.py) and hands them to the writer (writer.py); the elector (leader.py) decides
who writes; Syncer (sync.py) lists, re-lists and full-syncs; kopf (kopf_wiring.py)
watches DeviceClasses; health.py serves /healthz, /readyz and /metrics; lifecycle.py
stops it all in one written order. See ARCHITECTURE.md.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass, replace

from kubernetes_asyncio import client

from draview.controller import explain_api, kube, kubeconfig, metrics, watch
from draview.controller.core import Controller, Settings
from draview.controller.explain_answers import ClaimAnswers
from draview.controller.explain_endpoint import LeaderEndpoint
from draview.controller.fit_answers import FitAnswers
from draview.controller.health import serve
from draview.controller.informers import Informer, build_informers
from draview.controller.kopf_wiring import start_kopf
from draview.controller.leader import LeaderElector
from draview.controller.lifecycle import chain_signals, shutdown, wait_for_stop
from draview.controller.node_index import reads_node_status
from draview.controller.pod_events import NotReadyReporter, own_pod
from draview.controller.probe_source import ProbeSource
from draview.controller.ratelimit import TokenBucket
from draview.controller.startup import cluster_profile, discover, event_posters, refuse
from draview.controller.sync import Syncer
from draview.controller.writer import Writer
from draview.engine.profile import Profile, ProfileError

log = logging.getLogger("draview")


@dataclass(frozen=True)
class ExplainConfig:
    """The explain API (explain_api.py): its port and certificate, and the Service whose
    EndpointSlice the leader keeps (None: whoever installs it points a Service here)."""

    port: int
    cert_dir: str
    service: str | None = None
    address: str | None = None


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
    # Whose scheduler to mirror: None reads the cluster's release (/version) and gates
    # (/metrics); set, they replace what the cluster says.
    kubernetes_version: str | None = None
    feature_gates: dict[str, bool] | None = None
    explain: ExplainConfig | None = None


async def run(cfg: RunConfig) -> int:
    """The operator's life; a failure to start is a StartupError (one line)."""
    origin = await kubeconfig.load(cfg.kubeconfig, cfg.context)
    api = kube.api_client()
    # The identity in every request's user agent: the API server's audit log then names
    # the replica behind each write.
    api.user_agent = f"draview/{cfg.identity}"
    try:
        learnt = await _learn(cfg, api, origin)
        return learnt if isinstance(learnt, int) else await _run(cfg, api, *learnt)
    finally:
        await api.close()


async def _learn(
    cfg: RunConfig, api: client.ApiClient, origin: str
) -> tuple[Profile, dict[str, str]] | int:
    """The first requests: whose scheduler to mirror, what the server serves. An exit
    code when there is nothing to run (DRA not served, a release draview cannot judge)."""
    with kubeconfig.first_contact(str(api.configuration.host), origin):
        try:
            profile = await cluster_profile(api, cfg.kubernetes_version, cfg.feature_gates)
        except ProfileError as exc:
            with kubeconfig.listening(cfg.bind_address, cfg.port):
                return await refuse(cfg.bind_address, cfg.port, str(exc))
        versions = await discover(api, cfg.lease_namespace if cfg.leader_elect else None)
    return 1 if versions is None else (profile, versions)


async def _run(
    cfg: RunConfig, api: client.ApiClient, profile: Profile, versions: dict[str, str]
) -> int:
    engine = replace(cfg.settings.engine, profile=profile)
    cfg = replace(cfg, settings=replace(cfg.settings, engine=engine))
    elector: LeaderElector | None = None
    writer = Writer(
        client.CustomObjectsApi(api),
        TokenBucket(cfg.qps, cfg.burst),
        concurrency=cfg.write_concurrency,
        max_object_bytes=cfg.settings.max_object_bytes,
        # The fence: no write starts unless this replica provably still leads.
        may_write=lambda: elector is None or elector.may_write(),
    )
    metrics.WRITES_PENDING.set_function(lambda: len(writer.queue))
    ctl = Controller(writer, cfg.settings, *event_posters(api, cfg.identity, versions))
    ctl.reconciler.nodes_watched = "nodes" in versions
    node_status = reads_node_status(profile)
    if node_status:
        log.info("reading whole Nodes: the scheduler reads their declared features")
    informers = build_informers(
        api, ctl.ingest, versions, cfg.watch_silence_timeout, node_status=node_status
    )
    syncer = Syncer(ctl, informers, api, versions)
    with kubeconfig.listening(cfg.bind_address, cfg.port):
        runner = await serve(cfg.bind_address, cfg.port, syncer.not_ready)
    await syncer.initial_list()
    if cfg.leader_elect:
        elector = _elector(api, cfg, syncer)
    else:
        metrics.IS_LEADER.set(1)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if cfg.settings.capacity_probes:
        ctl.capacity.source = ProbeSource(api, cfg.lease_namespace, versions["resourceclaims"])
    kopf_task = start_kopf(ctl.ingest, api, versions, stop)
    chain_signals(loop, stop)  # kopf replaces our handlers when it starts: chain them
    tasks = [*_start_tasks(cfg, ctl, syncer, informers), kopf_task]
    pod = own_pod()
    if pod is not None:
        reporter = NotReadyReporter(api, pod, syncer.not_ready)
        tasks.append(asyncio.create_task(reporter.run(), name="not-ready-events"))
    endpoint = _explain_api(api, cfg, ctl, tasks, pod)
    if elector is not None:
        tasks.append(asyncio.create_task(elector.run(), name="leader"))
    else:
        syncer.become_leader()
    code = await wait_for_stop(stop, tasks)
    log.info("stopping")
    if endpoint is not None and ctl.role.leader:
        await endpoint.release()
    extra = [syncer.sync_task] if syncer.sync_task is not None else []
    await shutdown(ctl, elector, [*tasks, *extra], cfg.shutdown_timeout)
    await runner.cleanup()
    return code


def _start_tasks(
    cfg: RunConfig, ctl: Controller, syncer: Syncer, informers: list[Informer]
) -> list[asyncio.Task[None]]:
    """The loops that run for the life of the process. Watches start before the initial
    sync writes anything, so that changes made during a long first sync are seen at once
    rather than replayed after it."""
    return [
        asyncio.create_task(ctl.worker.run(cfg.settings.batch_interval), name="batches"),
        asyncio.create_task(ctl.explanations.run(), name="explanations"),
        asyncio.create_task(ctl.capacity.run(), name="capacity-probes"),
        asyncio.create_task(
            ctl.capacity.reload_loop(cfg.settings.capacity_reload), name="capacity-definitions"
        ),
        asyncio.create_task(syncer.resync_loop(cfg.resync_interval), name="resync"),
        asyncio.create_task(syncer.crd_probe_loop(), name="crd-probe"),
        *(asyncio.create_task(i.run(), name=f"watch-{i.plural}") for i in informers),
    ]


def _explain_api(
    api: client.ApiClient,
    cfg: RunConfig,
    ctl: Controller,
    tasks: list[asyncio.Task[None]],
    pod: tuple[str, str, str] | None,
) -> LeaderEndpoint | None:
    """Start the explain API's port, and the leader's EndpointSlice when there is one;
    `pod`: own_pod(), the Pod the slice names."""
    e = cfg.explain
    if e is None:
        return None
    answers = ClaimAnswers(ctl.role, ctl.reconciler, ctl.explanations, cfg.identity)
    fits = FitAnswers(ctl.role, ctl.reconciler, cfg.identity)
    serving = explain_api.run(api, answers, fits, cfg.bind_address, e.port, e.cert_dir)
    tasks.append(asyncio.create_task(serving, name="explain-api"))
    warm = answers.keep_warm(cfg.settings.explain_interval)
    tasks.append(asyncio.create_task(warm, name="explain-catalog"))
    if e.service is None or e.address is None:
        return None
    endpoint = LeaderEndpoint(
        api,
        ctl.role,
        cfg.lease_namespace,
        e.service,
        e.address,
        e.port,
        None if pod is None else (pod[1], pod[2]),
    )
    tasks.append(asyncio.create_task(endpoint.run(), name="explain-endpoint"))
    return endpoint


def _elector(api: client.ApiClient, cfg: RunConfig, syncer: Syncer) -> LeaderElector:
    return LeaderElector(
        client.CoordinationV1Api(api),
        cfg.lease_namespace,
        cfg.lease_name,
        cfg.identity,
        syncer.become_leader,
        syncer.stop_leading,
        lease_seconds=cfg.lease_duration,
        renew_deadline=cfg.renew_deadline,
        retry_period=cfg.retry_period,
    )
