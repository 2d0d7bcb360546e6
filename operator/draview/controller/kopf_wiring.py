"""kopf's part: DeviceClasses only (a handful, read by explanations), through `on.event`.

No handler here ever patches a watched object, and kopf posts no Events of its own.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
from kubernetes_asyncio import client

from draview.controller import kube
from draview.controller.ingest import Ingest


def _register(registry: kopf.OperatorRegistry, ingest: Ingest, versions: dict[str, str]) -> None:
    """Only `on.event`: no handler here ever patches a watched object. kopf watches only
    DeviceClasses (a handful, read by explanations); it lists each watched kind before it
    watches it."""
    handlers = {
        "resourceslices": ingest.slice_event,
        "resourceclaims": ingest.claim_event,
        "devicetaintrules": ingest.taint_rule_event,
        "deviceclasses": ingest.class_event,
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


class _NoDiffBase(kopf.DiffBaseStorage):
    """No diff-base: draview has only `on.event` handlers, which never look at one.

    kopf builds the diff-base essence of every event regardless (a deep copy of the
    object, then another to strip progress fields), most of kopf's own work per event.
    With no essence there is nothing to diff, and nothing is ever written back to a
    watched object."""

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
    # unpaged list is one response, decoded whole.
    settings.watching.chunk_size = 500
    # kopf keeps a worker per object until it has idled this long; at start every object
    # gets one at once. Our handlers are cheap, so let workers go almost at once.
    settings.queueing.idle_timeout = 0.5
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.error_backoffs = [1, 2, 5, 10, 20]


def start_kopf(
    ingest: Ingest, api: client.ApiClient, versions: dict[str, str], stop: asyncio.Event
) -> asyncio.Task[Any]:
    """kopf as one task, logged in with our own credentials; it stops when `stop` is set."""
    registry = kopf.OperatorRegistry()
    _register(registry, ingest, {p: v for p, v in versions.items() if p == "deviceclasses"})

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        _kopf_settings(settings)

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return kube.kopf_login(api)

    operator = kopf.operator(registry=registry, standalone=True, clusterwide=True, stop_flag=stop)
    return asyncio.create_task(operator, name="kopf")
