"""Write status objects: create what is missing, write the status of what changed
(replaced at the version last seen; read back first when that copy is in doubt),
delete what no longer has a source. Rate-limited, never writes an unchanged object (an
unchanged world costs zero requests). Each request is tried once: a failed object backs
off on its own (retry.py) so that it never holds up the others, and nothing is sent
while `may_write()` (the leader's fence) is false.

Batches are handed over (`submit`) and written in the background by up to
`concurrency` runners, one object at a time each, through the queue of writequeue.py
(one write per object in flight, the newest body wins, changes before creations)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp
from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from draview.api.status import API_GROUP, CRD_VERSION, PLURALS
from draview.controller import metrics
from draview.controller.known import Known, canonical, left_out_bytes, owned_fields
from draview.controller.kube import Plain, list_pages
from draview.controller.mergepatch import merge_diff
from draview.controller.ratelimit import TokenBucket
from draview.controller.retry import Backoffs, Failure, classify
from draview.controller.writequeue import Job, ObjKey, Ticket, WriteQueue
from draview.engine.budget import DEFAULT_MAX_OBJECT_BYTES, fit_object, surely_fits

log = logging.getLogger("draview.writer")
MERGE = "application/merge-patch+json"
FIELD_MANAGER = "draview"
# Longest a Retry-After pauses every write (a larger one still holds back its object).
MAX_PAUSE = 10.0
# A request that gets no answer in this long counts as a (transient) timeout.
REQUEST_TIMEOUT = 30.0
# Objects waiting or in flight before a hand-over waits for room: about a full-sync
# chunk's (500 pools), so that judging runs at most a chunk ahead of the writes and the
# bodies held stay bounded (every pool's at once would be gigabytes at 65,000 nodes).
MAX_PENDING = 1000
# What a write can fail with (other than the fence): each is one object's failure.
REQUEST_ERRORS = (TimeoutError, ApiException, OSError, aiohttp.ClientError)


class NotLeader(Exception):
    """The fence closed: this replica may not (or no longer) write."""


def obj_key(obj: dict[str, Any]) -> ObjKey:
    return (PLURALS[obj["kind"]], obj["metadata"]["name"])


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


def _may_have_landed(exc: BaseException) -> bool:
    """Whether a failed request may have been carried out all the same: no answer (a
    timeout, a connection lost) or a server error (a 504 from a proxy after the API
    server wrote). A 4xx answer is the API server refusing it: nothing was written."""
    return not (isinstance(exc, ApiException) and 400 <= (exc.status or 0) < 500)


def _resource_version(body: bytes) -> str | None:
    found = _VERSION.search(body)
    return found.group(1).decode() if found else None


class Writer:
    def __init__(
        self,
        api: CustomObjectsApi,
        bucket: TokenBucket,
        concurrency: int = 64,
        may_write: Callable[[], bool] = lambda: True,
        backoffs: Backoffs[ObjKey] | None = None,
        max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES,
    ) -> None:
        self.api = api
        # No object may encode to more than this (engine/budget.py). Enforced here, where
        # each object is encoded anyway: most are measured by that encoding alone.
        self.max_object_bytes = max_object_bytes
        self.bucket = bucket
        self.may_write = may_write
        self.backoffs: Backoffs[ObjKey] = backoffs or Backoffs()
        # Failures that mean draview cannot work at all (CRD not served, RBAC missing),
        # by what is blocked; /readyz reports them. Cleared by the next success there.
        self.blocked: dict[str, str] = {}
        # The API server could not be reached at all: said once per outage, not once per
        # object (an outage during a first sync would be a warning per object in flight).
        self.unreachable = False
        # Objects whose server copy may differ from `known`: a write of theirs failed, and
        # it may have landed all the same (a timeout, a connection lost after sending).
        # A difference taken from what we remember could then leave the server's copy
        # wrong for good (a change undone afterwards compares equal to our copy and is
        # never written), so each is read back before its next write.
        self.uncertain: set[ObjKey] = set()
        # Requests in flight at once: one at a time caps throughput at 1/latency however
        # high --qps is, which made initial convergence of thousands of pools take minutes.
        self.concurrency = max(1, concurrency)
        # What each of our objects holds on the server, as far as we know.
        self.known: dict[ObjKey, Known] = {}
        # While load() runs (None otherwise): the objects written, deleted or put in
        # doubt since it began. What the writer knows of them is newer than the list.
        self.touched: set[ObjKey] | None = None
        # Cleared when RBAC forbids updating the status (a chart older than this code):
        # new objects then get their first status by merge patch, without a failed try.
        self.replace_status = True
        # What was handed over and is not written yet, and the tasks writing it.
        self.queue = WriteQueue()
        self.max_pending = MAX_PENDING
        self._runners: set[asyncio.Task[None]] = set()
        self._waiters: list[asyncio.Future[None]] = []

    async def load(self) -> None:
        """Learn what the server holds (startup, leadership, periodic re-list).

        In pages, keeping only what `put` compares: an unpaged list would be two objects
        a pool decoded at once, managedFields and all, on every re-list. An
        object that holds what we knew keeps our copy, so that a re-list of an unchanged
        world does not build a second copy of every status.

        Writes may go on meanwhile (a periodic re-list of 20,000 objects takes seconds,
        and claim changes must not wait for it): an object written, deleted or put in
        doubt while the pages are read is known as the writer last saw it, not as a page
        that may predate that write."""
        if self.touched is not None:
            raise RuntimeError("Writer.load is already running")
        known: dict[ObjKey, Known] = {}
        self.touched = set()
        try:
            for plural in PLURALS.values():
                async for page in list_pages(self.api, CRD_VERSION, plural, group=API_GROUP):
                    for item in page:
                        key = (plural, item["metadata"]["name"])
                        data = canonical(item)
                        before = self.known.get(key)
                        if before is None or before.data() != data:
                            before = Known.of(item, data)
                        before.version = item["metadata"].get("resourceVersion")
                        known[key] = before
        finally:
            touched, self.touched = self.touched, None
        for key in touched:
            mine = self.known.get(key)
            if mine is None:
                known.pop(key, None)
            else:
                known[key] = mine
        self.known = known
        self.uncertain &= touched  # every other copy is the server's again

    def previous_status(self, key: ObjKey) -> dict[str, Any] | None:
        """The status the server holds once what was handed over is written: a pool
        judged again before its last body was written keeps that body's transition
        times."""
        job = self.queue.latest(key)
        if job is not None:
            return job.body.get("status") if job.body is not None else None
        cur = self.known.get(key)
        return cur.value().get("status") if cur else None

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

    async def _create(self, key: ObjKey, obj: dict[str, Any]) -> str | None:
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
            there = await self._reread(key, None)
            if there is None:
                raise  # gone again meanwhile: tried later
            return (await self._update(key, obj, there))[1]
        return await self._write_status(key, obj, obj["status"], _resource_version(created))

    async def _update(
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
            version = _resource_version(changed)
        patch = merge_diff(cur["status"], obj["status"])
        if patch:
            version = await self._write_status(key, obj, patch, version)
        return bool(main or patch), version

    async def _write_status(
        self, key: ObjKey, obj: dict[str, Any], patch: dict[str, Any], version: str | None
    ) -> str | None:
        """Make the status `obj["status"]`: replaced at `version` (the server's copy is
        then what we last wrote, `patch` away from it), else by the merge patch. Returns
        the resourceVersion after it."""
        plural, name = key
        if version and self.replace_status:
            replaced = await self._replace_status(plural, obj, version)
            if replaced is not None:
                return replaced or None
            if self.replace_status:
                # 409: written since we last saw it, so `patch`, taken from what we
                # remember, may not be the difference any more: take it from what the
                # server holds now, and replace at that version.
                item = await self._get(key)
                version = item["metadata"].get("resourceVersion")
                patch = merge_diff(item.get("status") or {}, obj["status"])
                if not patch:
                    return version  # someone else wrote just what we would have
                replaced = await self._replace_status(plural, obj, version) if version else None
                if replaced is not None:
                    return replaced or None
        return await self._patch_status(plural, name, patch)

    async def _get(self, key: ObjKey) -> dict[str, Any]:
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

    async def _reread(self, key: ObjKey, known: Known | None) -> Known | None:
        """What the server holds of `key` (None: nothing): its status and version as
        read, its labels, owner and spec as we last wrote them when we did, so that the
        difference of those is still taken from what we wrote (another writer's labels
        stay theirs)."""
        try:
            item = await self._get(key)
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.known.pop(key, None)
            return None
        base = item if known is None else {**known.value(), "status": item.get("status") or {}}
        return Known.of(base, None, item["metadata"].get("resourceVersion"))

    async def _patch_status(self, plural: str, name: str, status: dict[str, Any]) -> str | None:
        """A merge patch of the status subresource (the whole status, or what changed)."""
        body = await self._call(
            "patch",
            plural,
            self.api.patch_cluster_custom_object_status,
            API_GROUP,
            CRD_VERSION,
            plural,
            name,
            Plain(status=status),
            _content_type=MERGE,
            want_body=True,
        )
        return _resource_version(body)

    async def _replace_status(self, plural: str, obj: dict[str, Any], version: str) -> str | None:
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
            return _resource_version(body) or ""
        except ApiException as exc:
            if exc.status == 403:
                self.replace_status = False
                log.warning("may not update status; status by merge patch instead")
            elif exc.status != 409:
                raise
            return None

    async def put(self, obj: dict[str, Any]) -> bool:
        """Make the server hold `obj`; True when a request was needed."""
        key = obj_key(obj)
        known = self.known.get(key)
        data = canonical(obj)
        # The bound holds for ASCII text; json.dumps escapes other characters (up to
        # six bytes for one), so such an object is measured as it will be sent.
        compact = len(data) + left_out_bytes(obj)
        if not (data.isascii() and surely_fits(compact, self.max_object_bytes)):
            obj = fit_object(obj, self.max_object_bytes)
            data = canonical(obj)
        try:
            if key in self.uncertain:
                known = await self._reread(key, known)
            elif known is not None and known.data() == data:
                return False
            if known is None:
                sent, version = True, await self._create(key, obj)
            else:
                # Equal but for how it is spelled (key order: the server sorts keys; a
                # null or an empty map it dropped) sends nothing: ours is remembered,
                # so that the next comparison is of bytes.
                sent, version = await self._update(key, obj, known)
        except ApiException as exc:
            if exc.status != 404 or known is None:
                raise
            # Deleted behind our back: create it again (a 404 there means the CRD is gone).
            self.known.pop(key, None)
            sent, version = True, await self._create(key, obj)
        self.uncertain.discard(key)
        self.known[key] = Known.of(obj, data, version)
        return sent

    async def delete(self, key: ObjKey) -> None:
        plural, name = key
        if key not in self.known:
            return
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
        self.known.pop(key, None)

    def _failed(self, key: ObjKey, exc: BaseException) -> float:
        """Count, back off and (once per object and reason) log a failed write; returns
        when the object may be tried again."""
        failure = classify(exc)
        plural, name = key
        metrics.UPDATE_ERRORS.labels(plural, failure.code).inc()
        if failure.code == "429" and failure.retry_after:
            # API Priority and Fairness rejected us: the whole writer waits as asked, not
            # just this object, so that the others do not run into the same limit.
            self.bucket.pause(min(failure.retry_after, MAX_PAUSE))
        now = self.backoffs.clock()  # before the delay is chosen: retry_in is never less
        not_before, new = self.backoffs.failed(key, failure)
        extra = {
            "object": f"{plural}/{name}",
            "code": failure.code,
            "reason": failure.reason,
            "retry_in": round(not_before - now, 3),
        }
        if failure.retry_after is not None:
            # Next to the wait chosen, so that a log shows it is never the shorter.
            extra["retry_after"] = failure.retry_after
        quiet = not new or plural in self.blocked
        self.unreachable = _log_failure(failure, extra, quiet, self.unreachable)
        return not_before

    def submit(
        self,
        desired: Iterable[dict[str, Any]],
        removed: Iterable[ObjKey],
        started: float | None = None,
        then: Callable[[Ticket], None] | None = None,
    ) -> Ticket:
        """Hand over `desired` to write and `removed` to delete, and return at once: the
        ticket settles (and calls `then`) when each is written, failed or replaced by a
        newer body. `started`: when the oldest change in it was seen (the update
        duration metric)."""
        ticket = Ticket(started, then)
        queue, known = self.queue, self.known
        for obj in desired:
            key = obj_key(obj)
            ticket.add()
            queue.put(Job(key, obj, ticket), first=key in known or key in queue.active)
        for key in removed:
            ticket.add()
            queue.put(Job(key, None, ticket), first=True)
        ticket.close()
        self._start_runners()
        return ticket

    async def apply(
        self,
        desired: Iterable[dict[str, Any]],
        removed: Iterable[ObjKey],
        started: float | None = None,
    ) -> dict[ObjKey, float]:
        """Write `desired`, delete `removed` and wait; returns the keys not written, each
        with the monotonic time before which it should not be tried again."""
        ticket = self.submit(desired, removed, started)
        await ticket.wait()
        return ticket.failed

    async def room(self) -> None:
        """Wait until fewer than `max_pending` objects are waiting or in flight."""
        await self._until(lambda: len(self.queue) < self.max_pending)

    async def drain(self) -> None:
        """Wait until everything handed over is written (or failed)."""
        await self._until(lambda: not len(self.queue))

    def cancel(self) -> None:
        """Stop writing (leadership lost, shutdown deadline passed): the writes in flight
        are cancelled, those waiting dropped, and their tickets settle them as failed
        now, so that the worker puts their pools back."""
        runners, self._runners = self._runners, set()
        self.uncertain.update(self.queue.active)  # cut off mid-write: may have landed
        if self.touched is not None:
            self.touched.update(self.queue.active)
        for task in runners:
            task.cancel()
        now = self.backoffs.clock()
        for job in self.queue.clear():
            job.settle(now)
        self._wake()

    def _start_runners(self) -> None:
        for _ in range(min(self.concurrency - len(self._runners), self.queue.ready())):
            self._runners.add(asyncio.create_task(self._runner()))

    async def _runner(self) -> None:
        """Write jobs until none may start. Several run at once; the token bucket still
        bounds the rate. A cancelled runner leaves its job to cancel(), which settled it."""
        while (job := self.queue.take()) is not None:
            failed_at = await self._write(job)
            self.queue.done(job.key)
            job.settle(failed_at)
            self._wake()
        self._runners.discard(asyncio.current_task())

    async def _write(self, job: Job) -> float | None:
        """One object's write; None when done, else when it may be tried again. An
        object that fails is not retried here: the worker judges its pool again once due."""
        key = job.key
        if key[0] in self.blocked:  # its kind is not served: try when the probe says so
            return self.backoffs.clock() + self.backoffs.policy.parked
        later = self.backoffs.not_before(key)
        if later is not None:
            return later
        try:
            return await self._attempt(job)
        finally:
            if self.touched is not None:  # a load() runs: see there
                self.touched.add(key)

    async def _attempt(self, job: Job) -> float | None:
        key = job.key
        try:
            if job.body is None:
                await self.delete(key)
            else:
                await self.put(job.body)
        except NotLeader:
            return self.backoffs.clock()
        except REQUEST_ERRORS as exc:
            if job.body is not None and _may_have_landed(exc):
                self.uncertain.add(key)
            return self._failed(key, exc)
        except Exception as exc:  # a bug must not stop the writes of every other object
            if job.body is not None:
                self.uncertain.add(key)
            log.exception("status write failed unexpectedly", extra={"object": "/".join(key)})
            return self.backoffs.failed(key, Failure("error", False, type(exc).__name__))[0]
        self.backoffs.succeeded(key)
        if self.unreachable:
            self.unreachable = False
            log.info("API server reachable again; status writes resume")
        return None

    async def _until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def probe(self) -> bool:
        """While a kind is not served, one cheap list tells when its CRD is back; True
        when something was unblocked (the caller then re-syncs everything)."""
        back = False
        for plural in [p for p in self.blocked if p in PLURALS.values()]:
            try:
                await self.api.list_cluster_custom_object(API_GROUP, CRD_VERSION, plural, limit=1)
            except (TimeoutError, ApiException, OSError, aiohttp.ClientError):
                continue
            log.info("served again", extra={"kind": plural})
            del self.blocked[plural]
            back = True
        if back:
            self.backoffs.clear()
        return back


def _log_failure(failure: Failure, extra: dict[str, Any], quiet: bool, unreachable: bool) -> bool:
    """Log a failed write so that a storm stays readable; returns whether the API server
    is now known unreachable. A missing CRD is one line (the blocked state), not one per
    object; so is an API server that cannot be reached. Repeats of a known reason
    (`quiet`) only at debug: a 429 storm must not flood the log."""
    if failure.code == "connection":
        if not unreachable:
            log.warning("API server unreachable; status writes wait for it", extra=extra)
        else:
            log.debug("status write failed again", extra=extra)
        return True
    if not quiet:
        msg = "status write failed; parked" if failure.permanent else "status write failed"
        log.warning(msg, extra=extra)
    else:
        log.debug("status write failed again", extra=extra)
    return unreachable
