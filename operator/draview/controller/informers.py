"""Informers: one per watched kind, each lists its kind into the store once and then
watches it from that list's resourceVersion (controller/watch.py: resume after a
disconnect, re-list on 410 Gone, give up a silent connection).

A re-list heals missed watch events: every listed object is applied (unchanged versions
are skipped by ingest), then what the store holds but the list did not name is deleted.
The periodic re-list runs while the watch goes on, and a list's pages are all the
snapshot of its start: an object the watch changed or deleted meanwhile is left to the
watch, which is newer (applied from a later page, the older copy would undo the change
for good: no later event comes to correct it).
Lists come in pages, so that the raw objects never all exist at once. kopf lists each of
its kinds before watching it and replays every listed object through its per-object
machinery, and the store needs a list of its own anyway (readiness, pruning): for kinds
that number tens of thousands, kopf's replay would cost more than the list; hence our
own list and watch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client

from draview.controller import kube, watch
from draview.controller.ingest import KEYS, Handler, Ingest, metadata
from draview.controller.metadata import CoreMetadata

log = logging.getLogger("draview.controller")

# (kind, plural), listed in this order: Nodes first, they are few and every pool that
# selects nodes is judged from them.
WATCHED = (
    ("node", "nodes"),
    ("slice", "resourceslices"),
    ("claim", "resourceclaims"),
    ("rule", "devicetaintrules"),
)


@dataclass
class Informer:
    kind: str
    plural: str
    api: Any  # lists and watches: CustomObjectsApi, or CoreMetadata for Nodes
    group: str
    version: str
    handler: Handler
    known: Callable[[], set[str]]  # the store's keys of this kind
    silence_timeout: float = watch.SILENCE_TIMEOUT
    resource_version: str = ""  # of the latest list; the watch starts from it
    # Keys the watch applied since the running re-list began (None: no re-list runs).
    watched: set[str] | None = None

    async def relist(self) -> str:
        """List the kind into the store, prune what it no longer holds; returns the
        list's resourceVersion. What the watch applies while the list runs is newer than
        the list: those objects are neither overwritten nor pruned by it."""
        before = self.known()
        listed: set[str] = set()
        snapshot: dict[str, str] = {}
        self.watched = set()
        try:
            pages = kube.list_pages(
                self.api, self.version, self.plural, group=self.group, listed=snapshot
            )
            async for page in pages:
                listed |= self.apply_page(page)
            self.prune(before, listed)
        finally:
            self.watched = None
        self.resource_version = snapshot.get("resourceVersion", "")
        return self.resource_version

    def apply_page(self, objs: list[dict[str, Any]]) -> set[str]:
        """Apply one page of a list; returns the store keys it named."""
        key_of, _ = KEYS[self.kind]
        watched = self.watched or ()
        listed = set()
        for obj in objs:
            key = key_of(metadata(obj))
            listed.add(key)
            if key not in watched:
                self.handler("MODIFIED", obj)
        return listed

    def prune(self, before: set[str], listed: set[str]) -> None:
        _, field_name = KEYS[self.kind]
        for key in before - listed - (self.watched or set()):
            self.handler("DELETED", {"metadata": {field_name: key}})
        log.debug("re-listed", extra={"kind": self.kind, "count": len(listed)})

    def on_event(self, event: str, obj: dict[str, Any]) -> None:
        """A watch event: applied, and noted while a re-list runs."""
        if self.watched is not None:
            self.watched.add(KEYS[self.kind][0](metadata(obj)))
        self.handler(event, obj)

    async def run(self) -> None:
        """Watch forever from the latest list (started after the first relist)."""
        await watch.follow(
            self.api,
            self.group,
            self.version,
            self.plural,
            self.resource_version,
            self.on_event,
            self.relist,
            self.silence_timeout,
        )


def build_informers(
    api: client.ApiClient,
    ingest: Ingest,
    versions: dict[str, str],
    silence_timeout: float,
    node_status: bool = False,
) -> list[Informer]:
    """One informer per watched kind the server serves (`versions`: plural -> version).
    `node_status`: read whole Nodes, for the features they declare (the profile's
    scheduler reads them); otherwise their metadata only."""
    custom = client.CustomObjectsApi(api)
    known: dict[str, Callable[[], set[str]]] = {
        "node": ingest.nodes.names,
        "slice": lambda: set(ingest.store.uids("slice")),
        "claim": lambda: set(ingest.store.uids("claim")),
        "rule": lambda: set(ingest.store.taint_rules),
    }
    out = []
    for kind, plural in WATCHED:
        if plural not in versions:
            continue
        api_of = CoreMetadata(api, whole=node_status) if plural == "nodes" else custom
        group = "" if plural == "nodes" else kube.GROUP
        out.append(
            Informer(
                kind,
                plural,
                api_of,
                group,
                versions[plural],
                ingest.handler(kind),
                known[kind],
                silence_timeout,
            )
        )
    return out


async def relist_classes(api: client.ApiClient, ingest: Ingest, version: str) -> None:
    """DeviceClasses (a handful, read by explanations) are listed whole, kopf watches them."""
    classes = await kube.list_all(client.CustomObjectsApi(api), version, "deviceclasses")
    ingest.store.classes.clear()
    for obj in classes:
        ingest.class_event("ADDED", obj)
