"""What `draview run` learns before it starts anything: its own permissions, the versions
the server serves, whether it may watch Nodes; and the retry of startup steps."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import Awaitable, Callable, Iterable

import aiohttp
from kubernetes_asyncio import client

from draview.api.claims import ResourceClaim
from draview.controller import kube, metrics
from draview.controller.claim_events import post_event
from draview.controller.event_rounds import PostEvent, PostSliceEvent
from draview.controller.health import serve
from draview.controller.slice_events import SliceEvent, post_slice_event
from draview.engine import profile as profiles
from draview.engine.profile import Profile, make_profile

log = logging.getLogger("draview")
REPORTED = "the API server's /metrics"


async def cluster_profile(
    api: client.ApiClient, version: str | None, gates: dict[str, bool] | None
) -> Profile:
    """Whose scheduler to mirror: the release from /version and the gates the API server
    reports in /metrics (kubernetes_feature_enabled), each unless given. Where /metrics
    cannot be read, the release's defaults, said once in the log and in a metric (and in
    every pool's status.profile.source). An unsupported release is a ProfileError."""
    server = await kube.server_version(api)
    if gates is not None:
        profile = make_profile(version or server, gates, "flags", strict=False)
        _say_gate_names(profile.release, gates, "--feature-gates")
    elif version is not None:
        profile = make_profile(version, source="flags")
    else:
        text, why = None, ""
        try:
            text, why = await kube.feature_metrics(api)
        except (client.exceptions.ApiException, aiohttp.ClientError, OSError) as exc:
            why = f"GET /metrics: {exc}"
        profile = profiles.cluster_profile(server, text)
        if text is not None:
            reported = profiles.gates_from_metrics(text)
            _say_gate_names(profile.release, reported, REPORTED)
        if profile.source == profiles.UNREAD:
            log.warning(
                "cannot read the API server's feature gates: judging with the release's "
                "default gates (grant get on the non-resource URL /metrics, or set "
                "--feature-gates)",
                extra={"server": server, "error": why or "no kubernetes_feature_enabled metric"},
            )
    metrics.PROFILE.labels(
        kubernetes_version=profile.release, allocator=profile.implementation, gates=profile.source
    ).set(1)
    if (caveat := profile.caveat()) is not None:
        log.warning(caveat, extra={"server": server})
    log.info(
        "judging as %s",
        profile.label(),
        extra={"server": server, "allocator": profile.implementation, "gates": profile.source},
    )
    return profile


def _say_gate_names(release: str, gates: Iterable[str], where: str) -> None:
    """Gates that are left out of the profile, never silently: a DRA gate draview does
    not know (a typo, or newer than draview) is a warning, the rest one info line."""
    names = profiles.sort_gates(release, gates)
    for problem in names.problems(reported=where == REPORTED):
        log.warning("%s: judged without it", problem, extra={"from": where})
    if (note := names.ignored_note()) is not None:
        log.info(note, extra={"from": where})


async def refuse(host: str, port: int, reason: str) -> int:
    """A cluster draview cannot judge: one error line, /readyz answers 503 with the reason
    (/healthz stays ok, so the pod is not restarted in a loop), and when stopped the
    process exits 3."""
    log.error(reason)
    runner = await serve(host, port, lambda: reason)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
    return 3


async def discover(api: client.ApiClient, lease_namespace: str | None) -> dict[str, str] | None:
    """plural -> version of every kind to watch; None when DRA is not served."""
    missing = await kube.self_check(api, lease_namespace)
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
                return None
            log.info("DeviceTaintRules are not served; only device taints apply")
            continue
        versions[plural] = version
    if {"list nodes.", "watch nodes."} & set(missing):
        log.warning(
            "cannot watch Nodes: pools whose slices select nodes are judged from assumed "
            "nodes, as offline without Nodes (grant get, list and watch on nodes)"
        )
    else:
        versions["nodes"] = "v1"
    metrics.NODES_WATCHED.set(int("nodes" in versions))
    log.info("watching", extra={"versions": versions})
    return versions


def event_posters(
    api: client.ApiClient, identity: str, versions: dict[str, str]
) -> tuple[PostEvent, PostSliceEvent]:
    """How Events are posted on claims and slices, in the versions the server serves."""

    async def post(claim: ResourceClaim, message: str) -> None:
        claims_version = f"{kube.GROUP}/{versions['resourceclaims']}"
        await post_event(api, claim, message, instance=identity, api_version=claims_version)

    async def post_slice(ev: SliceEvent) -> None:
        slices_version = f"{kube.GROUP}/{versions['resourceslices']}"
        await post_slice_event(api, ev, instance=identity, api_version=slices_version)

    return post, post_slice


NO_CRDS = "draview CRDs are not served; install them with `kubectl apply -k deploy/crds`"


async def until_done(
    what: str,
    step: Callable[[], Awaitable[None]],
    failing: Callable[[str | None], None] = lambda _: None,
) -> None:
    """Retry a startup step until it succeeds: an API server that is restarting (429
    "storage is (re)initializing", 5xx, refused connections) or CRDs not served yet must
    delay readiness, never crash the operator. `failing` hears why the last attempt
    failed (None once it succeeded), so that /readyz can say it."""
    delay = 1.0
    while True:
        try:
            await step()
            failing(None)
            return
        except client.exceptions.ApiException as exc:
            if exc.status == 404:
                log.error(NO_CRDS, extra={"step": what})
                failing(NO_CRDS)
            else:
                log.warning(
                    "API request failed",
                    extra={"step": what, "code": exc.status, "reason": exc.reason},
                )
                failing(f"the API server answered {exc.status} {exc.reason}")
        except (OSError, TimeoutError, aiohttp.ClientError) as exc:
            log.warning("API server unreachable", extra={"step": what, "error": str(exc)})
            failing(f"the API server is unreachable: {str(exc)[:200]}")
        if not gc.isenabled():
            # Inside sync.long_lived nothing collects, and what it built is frozen
            # without a collection at its end: what the failed attempt left in cycles
            # (its traceback's frames) is freed now, not kept for good. Failures only:
            # a collection walks all that was built since the last freeze.
            gc.collect()
        await asyncio.sleep(delay)
        delay = min(delay * 2, 30.0)
