"""The status writer's requests to the API server: create an object, bring its labels,
owner and spec to what was judged, replace or merge-patch its status, read it back, delete
it, and probe a kind that is not served. Each method is one object's requests, sent once;
what to write, when and how often is the writer's (writer.py). Failures that block every
write of a kind (RBAC, a CRD missing) are recorded in `blocked` for /readyz and the writer."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

import aiohttp
from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from draview.api.status import API_GROUP, CRD_VERSION, PLURALS
from draview.controller import metrics
from draview.controller.known import Known, owned_fields
from draview.controller.kube import Plain
from draview.controller.mergepatch import merge_diff
from draview.controller.ratelimit import TokenBucket
from draview.controller.writequeue import ObjKey

log = logging.getLogger("draview.writer")
MERGE = "application/merge-patch+json"
FIELD_MANAGER = "draview"
# A request that gets no answer in this long counts as a (transient) timeout.
REQUEST_TIMEOUT = 30.0
# What a write can fail with (other than the fence): each is one object's failure.
REQUEST_ERRORS = (TimeoutError, ApiException, OSError, aiohttp.ClientError)


class NotLeader(Exception):
    """The fence closed: this replica may not (or no longer) write."""


async def _send(verb: str, fn: Any, *args: Any, want_body: bool = False, **kw: Any) -> bytes:
    """One request. Its response is never decoded here (the writer rarely needs it, and
    decoding every returned object is CPU spent on every write) but always read to its
    end: aiohttp closes a connection released with part of a body unread, and an
    object's status returned is often larger than what arrives with the headers, so
    skipping the read would cost a new TLS connection, and the API server a handshake,
    for most writes. Requests carry draview as their field manager, so managedFields
    name who wrote what."""
    if verb not in ("delete", "get"):  # only writes other than deletes take one
        kw["field_manager"] = FIELD_MANAGER
    resp = await fn(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kw)
    try:
        body = await resp.read()
        if not 200 <= resp.status <= 299:
            # What kubernetes_asyncio raises itself when it reads the response.
            exc = ApiException(status=resp.status, reason=resp.reason)
            exc.body = body.decode(errors="replace")
            exc.headers = getattr(resp, "headers", None)  # Retry-After
            raise exc
        return bytes(body) if want_body else b""
    finally:
        resp.release()


# The first resourceVersion in an object the API server returns is its metadata's: Go
# encodes map keys sorted (metadata before spec and status; managedFields name fields
# "f:..."), and a quote inside a string is escaped. Found without decoding the object:
# every write's response is read for it. Should an annotation keyed "resourceVersion"
# come first, the replace at that version fails with 409 and a merge patch writes.
_VERSION = re.compile(rb'"resourceVersion"\s*:\s*"([^"\\]+)"')


def may_have_landed(exc: BaseException) -> bool:
    """Whether a failed request may have been carried out all the same: no answer (a
    timeout, a connection lost) or a server error (a 504 from a proxy after the API
    server wrote). A 4xx answer is the API server refusing it: nothing was written."""
    return not (isinstance(exc, ApiException) and 400 <= (exc.status or 0) < 500)


def resource_version(body: bytes) -> str | None:
    found = _VERSION.search(body)
    return found.group(1).decode() if found else None


class StatusRequests:
    """One replica's requests for its status objects, behind the token bucket and the
    leader's fence (`may_write`, checked after each wait for a token)."""

    def __init__(
        self, api: CustomObjectsApi, bucket: TokenBucket, may_write: Callable[[], bool]
    ) -> None:
        self.api = api
        self.bucket = bucket
        self.may_write = may_write
        # Failures that mean draview cannot work at all (CRD not served, RBAC missing),
        # by what is blocked; /readyz reports them. Cleared by the next success there.
        self.blocked: dict[str, str] = {}
        # Cleared when RBAC forbids updating the status (a chart older than this code):
        # new objects then get their first status by merge patch, without a failed try.
        self.replace_status = True

    def _block(self, what: str, message: str) -> None:
        if what not in self.blocked:
            log.error("cannot write status", extra={"blocked": what, "reason": message})
        self.blocked[what] = message

    async def _call(
        self, verb: str, kind: str, fn: Any, *args: Any, fallback: bool = False, **kw: Any
    ) -> bytes:
        """One request. `fallback`: the caller has another way when this is forbidden, so
        a 403 here does not block anything."""
        await self.bucket.take()
        # Checked after the wait for a token: the fence may have closed meanwhile.
        if not self.may_write():
            raise NotLeader
        try:
            body = await _send(verb, fn, *args, **kw)
        except ApiException as exc:
            if exc.status == 403 and not fallback:
                self._block(f"{verb} {kind}", f"RBAC forbids {verb} on {kind}.{API_GROUP}")
            elif exc.status == 404 and verb == "create":
                # Nothing to create in: the CustomResourceDefinition is gone.
                self._block(kind, f"{kind}.{API_GROUP} is not served: CRD missing")
            raise
        metrics.WRITES.labels(verb, kind).inc()
        self.blocked.pop(f"{verb} {kind}", None)
        self.blocked.pop(kind, None)
        return body

    async def create(self, key: ObjKey, obj: dict[str, Any]) -> str | None:
        """Create, then set the status: the status subresource ignores status on create.
        Replacing the status at the version the create returned costs the API server
        less than a merge patch, which it must apply to the stored object first (encode
        it, merge, decode the result). A merge patch is the fallback when the version is
        unknown, or when an older RBAC grants patch but not update on the status (403).
        Returns the object's resourceVersion after the status write (None: unknown)."""
        plural = key[0]
        body = Plain((k, obj[k]) for k in ("apiVersion", "kind", "metadata", "spec"))
        try:
            created = await self._call(
                "create",
                plural,
                self.api.create_cluster_custom_object,
                API_GROUP,
                CRD_VERSION,
                plural,
                body,
                want_body=True,
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            # Already there (an earlier us made it, or a create we took for failed
            # landed): brought to `obj` from what it holds.
            there = await self.reread(key, None)
            if there is None:
                raise  # gone again meanwhile: tried later
            return (await self.update(key, obj, there))[1]
        return await self.write_status(key, obj, obj["status"], resource_version(created))

    async def update(
        self, key: ObjKey, obj: dict[str, Any], known: Known
    ) -> tuple[bool, str | None]:
        """Bring the server's copy, `known`, to `obj`: whether a request was needed, and
        the resourceVersion after."""
        plural, name = key
        version = known.version
        cur = json.loads(known.data())
        # Labels and owner (a slice re-created under its name has a new uid), and the
        # spec as a merge diff so that a field that went away becomes null.
        main = merge_diff(owned_fields(cur), owned_fields(obj))
        if main:
            changed = await self._call(
                "patch",
                plural,
                self.api.patch_cluster_custom_object,
                API_GROUP,
                CRD_VERSION,
                plural,
                name,
                Plain(main),
                _content_type=MERGE,
                want_body=True,
            )
            version = resource_version(changed)
        patch = merge_diff(cur["status"], obj["status"])
        if patch:
            version = await self.write_status(key, obj, patch, version)
        return bool(main or patch), version

    async def write_status(
        self, key: ObjKey, obj: dict[str, Any], patch: dict[str, Any], version: str | None
    ) -> str | None:
        """Make the status `obj["status"]`: replaced at `version` (the server's copy is
        then what we last wrote, `patch` away from it), else by the merge patch. Returns
        the resourceVersion after it."""
        plural, name = key
        if version and self.replace_status:
            replaced = await self.update_status(plural, obj, version)
            if replaced is not None:
                return replaced or None
            if self.replace_status:
                # 409: written since we last saw it, so `patch`, taken from what we
                # remember, may not be the difference any more: take it from what the
                # server holds now, and replace at that version.
                item = await self.get(key)
                version = item["metadata"].get("resourceVersion")
                patch = merge_diff(item.get("status") or {}, obj["status"])
                if not patch:
                    return version  # someone else wrote just what we would have
                replaced = await self.update_status(plural, obj, version) if version else None
                if replaced is not None:
                    return replaced or None
        return await self.patch_status(plural, name, patch)

    async def get(self, key: ObjKey) -> dict[str, Any]:
        """The server's copy of `key`, read back because ours is in doubt."""
        plural, name = key
        metrics.REREADS.labels(plural).inc()
        await self.bucket.take()
        body = await _send(
            "get",
            self.api.get_cluster_custom_object,
            API_GROUP,
            CRD_VERSION,
            plural,
            name,
            want_body=True,
        )
        item: dict[str, Any] = json.loads(body)
        return item

    async def reread(self, key: ObjKey, known: Known | None) -> Known | None:
        """What the server holds of `key` (None: nothing): its status and version as
        read, its labels, owner and spec as we last wrote them when we did, so that the
        difference of those is still taken from what we wrote (another writer's labels
        stay theirs)."""
        try:
            item = await self.get(key)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return None
        base = item if known is None else {**known.value(), "status": item.get("status") or {}}
        return Known.of(base, None, item["metadata"].get("resourceVersion"))

    async def patch(self, plural: str, name: str, body: dict[str, Any]) -> str | None:
        """A merge patch of the object itself (its spec, its labels)."""
        return await self._merge(self.api.patch_cluster_custom_object, plural, name, body)

    async def patch_status(self, plural: str, name: str, status: dict[str, Any]) -> str | None:
        """A merge patch of the status subresource (the whole status, or what changed)."""
        fn = self.api.patch_cluster_custom_object_status
        return await self._merge(fn, plural, name, {"status": status})

    async def _merge(self, fn: Any, plural: str, name: str, body: dict[str, Any]) -> str | None:
        """The resourceVersion after a merge patch by `fn` (None: the answer names none)."""
        found = await self._call(
            "patch",
            plural,
            fn,
            API_GROUP,
            CRD_VERSION,
            plural,
            name,
            Plain(body),
            _content_type=MERGE,
            want_body=True,
        )
        return resource_version(found)

    async def update_status(self, plural: str, obj: dict[str, Any], version: str) -> str | None:
        """The new resourceVersion ("" when the answer names none); None when a merge
        patch must do it instead: the version is stale (someone else wrote since), or
        RBAC allows only patch."""
        name = obj["metadata"]["name"]
        try:
            body = await self._call(
                "update",
                plural,
                self.api.replace_cluster_custom_object_status,
                API_GROUP,
                CRD_VERSION,
                plural,
                name,
                Plain(
                    apiVersion=obj["apiVersion"],
                    kind=obj["kind"],
                    metadata={"name": name, "resourceVersion": version},
                    status=obj["status"],
                ),
                fallback=True,  # a merge patch instead, if RBAC allows only that
                want_body=True,
            )
            return resource_version(body) or ""
        except ApiException as exc:
            if exc.status == 403:
                self.replace_status = False
                log.warning("may not update status; status by merge patch instead")
            elif exc.status != 409:
                raise
            return None

    async def delete(self, key: ObjKey) -> None:
        plural, name = key
        try:
            await self._call(
                "delete",
                plural,
                self.api.delete_cluster_custom_object,
                API_GROUP,
                CRD_VERSION,
                plural,
                name,
            )
        except ApiException as exc:
            if exc.status != 404:  # already gone is what we wanted
                raise

    async def probe(self) -> bool:
        """While a kind is not served, one cheap list tells when its CRD is back; True
        when something was unblocked."""
        back = False
        for plural in [p for p in self.blocked if p in PLURALS.values()]:
            try:
                await self.api.list_cluster_custom_object(API_GROUP, CRD_VERSION, plural, limit=1)
            except REQUEST_ERRORS:
                continue
            log.info("served again", extra={"kind": plural})
            del self.blocked[plural]
            back = True
        return back
