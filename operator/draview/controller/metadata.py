"""Lists and watches of a core kind (Nodes), metadata only as client-go's metadata
informer, or whole.

A Node object carries its status (images, conditions, addresses: often 10-20 KB); the
allocator needs only its name and labels, so asking for PartialObjectMetadata makes the
API server send just the metadata, for lists and for watch events alike. The one
exception: with DRAOptionalNodeOperations on, 1.37's scheduler reads each node's
`status.declaredFeatures`, which metadata leaves out; then whole objects are read (and
all but the labels and declared features dropped on arrival, api/node_info.py).

`CoreMetadata` answers `list_cluster_custom_object` like kubernetes_asyncio's
CustomObjectsApi, so the same paged list and resumable watch code serves it.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

LIST_AS = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
WATCH_AS = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

_QUERY = {
    "limit": "limit",
    "_continue": "continue",
    "resource_version": "resourceVersion",
    "timeout_seconds": "timeoutSeconds",
}
_FLAGS = {"watch": "watch", "allow_watch_bookmarks": "allowWatchBookmarks"}


class CoreMetadata:
    """Lists and watches of a core/v1 kind (`/api/v1/<plural>`), metadata only unless
    `whole` (then the objects as the API server stores them, status included)."""

    def __init__(self, api: client.ApiClient, whole: bool = False) -> None:
        self.api_client = api
        self.whole = whole

    async def list_cluster_custom_object(
        self, group: str, version: str, plural: str, **kwargs: Any
    ) -> Any:
        if group:
            raise ValueError(f"CoreMetadata serves the core group only, not {group!r}")
        query = [(_QUERY[k], v) for k, v in kwargs.items() if k in _QUERY and v is not None]
        query += [(_FLAGS[k], "true") for k, v in kwargs.items() if k in _FLAGS and v]
        watching = bool(kwargs.get("watch"))
        accept = "application/json" if self.whole else WATCH_AS if watching else LIST_AS
        return await self.api_client.call_api(
            f"/api/{version}/{plural}",
            "GET",
            query_params=query,
            header_params={"Accept": accept},
            response_types_map={200: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _preload_content=kwargs.get("_preload_content", True),
            _request_timeout=kwargs.get("_request_timeout"),
        )
