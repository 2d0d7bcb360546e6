"""What `draview run` learns before it starts anything: its own permissions, the versions
the server serves, whether it may watch Nodes; and the retry of startup steps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import aiohttp
from kubernetes_asyncio import client

from draview.api.claims import ResourceClaim
from draview.controller import kube, metrics
from draview.controller.events import SliceEvent, post_event, post_slice_event
from draview.controller.explanations import PostEvent, PostSliceEvent

log = logging.getLogger("draview")


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


async def until_done(what: str, step: Callable[[], Awaitable[None]]) -> None:
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
