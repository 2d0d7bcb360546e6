"""Watch a kind from the resourceVersion of our own list.

The store is filled by one paged list and kept current by this watch. A kopf watch
lists everything first and replays each object through its per-object machinery, so
watching these kinds with kopf would list them twice at start and run tens of thousands
of objects through that replay (measured: bench/HISTORY.md, "one listing at start").
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger("draview.watch")

Handler = Callable[[str, dict[str, Any]], None]  # (event type, object)
# The server ends each watch after this long (client-go picks 5-10 minutes); a request
# silent for longer than the client timeout is a dead connection.
SERVER_TIMEOUT = 300
CLIENT_TIMEOUT = 330
# A connection that stays open but carries nothing (a peer gone without a reset, a
# frozen API server) would otherwise hold the watch until CLIENT_TIMEOUT, the store
# going stale all the while. The API server sends a bookmark about once a minute to a
# watch that asked for them (the watch cache's bookmarkFrequency), so a silence of
# several minutes' worth is a dead connection; resuming costs one request, no re-list.
SILENCE_TIMEOUT = 150.0


class Gone(Exception):
    """410: the resourceVersion is older than what the server keeps; re-list."""


async def stream(
    api: CustomObjectsApi,
    group: str,
    version: str,
    plural: str,
    resource_version: str,
    handler: Handler,
    server_timeout: int = SERVER_TIMEOUT,
    silence_timeout: float = SILENCE_TIMEOUT,
) -> str:
    """Apply every event from `resource_version` until the server ends the watch; returns
    the last resourceVersion seen (bookmarks included) to resume from."""
    resp = await api.list_cluster_custom_object(
        group,
        version,
        plural,
        watch=True,
        resource_version=resource_version,
        allow_watch_bookmarks=True,
        timeout_seconds=server_timeout,
        _preload_content=False,
        _request_timeout=aiohttp.ClientTimeout(total=CLIENT_TIMEOUT, sock_read=silence_timeout),
    )
    try:
        if resp.status == 410:
            raise Gone
        if not 200 <= resp.status <= 299:
            raise ApiException(status=resp.status, reason=resp.reason)
        buf = b""
        # Whole chunks, split on newlines here: aiohttp's line reader caps a line's
        # length, and one ResourceSlice may be over a megabyte.
        async for chunk in resp.content.iter_any():
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    resource_version = _apply(json.loads(line), resource_version, handler)
        if buf.strip():
            resource_version = _apply(json.loads(buf), resource_version, handler)
    finally:
        resp.release()
    return resource_version


def _apply(event: dict[str, Any], resource_version: str, handler: Handler) -> str:
    kind, obj = event.get("type"), event.get("object") or {}
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise Gone
        raise ApiException(status=obj.get("code") or 500, reason=obj.get("message"))
    seen = (obj.get("metadata") or {}).get("resourceVersion") or resource_version
    if kind in ("ADDED", "MODIFIED", "DELETED"):
        handler(kind, obj)
    return str(seen)


async def follow(
    api: CustomObjectsApi,
    group: str,
    version: str,
    plural: str,
    resource_version: str,
    handler: Handler,
    relist: Callable[[], Awaitable[str]],
    silence_timeout: float = SILENCE_TIMEOUT,
) -> None:
    """Watch forever. After the server ends a watch or the connection breaks, go on from
    the last version seen (nothing is missed or replayed); when that version is gone,
    re-list, which also prunes what was deleted meanwhile, and go on from the list."""
    delay = 1.0
    stale = False
    while True:
        try:
            if stale:
                resource_version = await relist()
                stale = False
            resource_version = await stream(
                api,
                group,
                version,
                plural,
                resource_version,
                handler,
                silence_timeout=silence_timeout,
            )
            delay = 1.0
        except Gone:
            log.info("watch expired; re-listing", extra={"kind": plural})
            stale = True
        except (ApiException, OSError, TimeoutError, aiohttp.ClientError, ValueError) as exc:
            log.warning(
                "watch failed; resuming",
                extra={"kind": plural, "error": str(exc) or type(exc).__name__, "retry_in": delay},
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)  # every second of it, the store may be stale
