"""Write status objects: create what is missing, write the status of what changed
(replaced at the version last seen; read back first when that copy is in doubt),
delete what no longer has a source. Rate-limited, never writes an unchanged object (an
unchanged world costs zero requests); the requests themselves are status_requests.py's,
this module decides which to send, for which object, and when. Each request is tried
once: a failed object backs off on its own (retry.py) so that it never holds up the
others, and nothing is sent while `may_write()` (the leader's fence) is false.

Batches are handed over (`submit`) and written in the background by up to
`concurrency` runners, one object at a time each, through the queue of writequeue.py
(one write per object in flight, the newest body wins, changes before creations)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes_asyncio.client import CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from draview.api.status import API_GROUP, CRD_VERSION, PLURALS
from draview.controller import metrics
from draview.controller.known import Known, canonical, left_out_bytes
from draview.controller.kube import list_pages
from draview.controller.ratelimit import TokenBucket
from draview.controller.retry import Backoffs, Failure, classify
from draview.controller.status_requests import (
    REQUEST_ERRORS,
    NotLeader,
    StatusRequests,
    may_have_landed,
)
from draview.controller.writequeue import Job, ObjKey, Ticket, Waiters, WriteQueue
from draview.engine.budget import DEFAULT_MAX_OBJECT_BYTES, fit_object, surely_fits

log = logging.getLogger("draview.writer")
# Longest a Retry-After pauses every write (a larger one still holds back its object).
MAX_PAUSE = 10.0
# Objects waiting or in flight before a hand-over waits for room: about a full-sync
# chunk's (500 pools), so that judging runs at most a chunk ahead of the writes and the
# bodies held stay bounded (every pool's at once would be gigabytes at 65,000 nodes).
MAX_PENDING = 1000


def obj_key(obj: dict[str, Any]) -> ObjKey:
    return (PLURALS[obj["kind"]], obj["metadata"]["name"])


class Writer:
    # The request layer's class: a test or a benchmark answers or counts requests in a
    # subclass of it instead of sending them.
    requests_class: type[StatusRequests] = StatusRequests

    def __init__(
        self,
        api: CustomObjectsApi,
        bucket: TokenBucket,
        concurrency: int = 64,
        may_write: Callable[[], bool] = lambda: True,
        backoffs: Backoffs[ObjKey] | None = None,
        max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES,
    ) -> None:
        self.requests = self.requests_class(api, bucket, may_write)
        # No object may encode to more than this (engine/budget.py). Enforced here, where
        # each object is encoded anyway: most are measured by that encoding alone.
        self.max_object_bytes = max_object_bytes
        self.bucket = bucket
        self.may_write = may_write
        self.backoffs: Backoffs[ObjKey] = backoffs or Backoffs()
        # What cannot be written at all (CRD not served, RBAC missing): the request
        # layer's record, one dict, read here and by /readyz.
        self.blocked = self.requests.blocked
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
        # What was handed over and is not written yet, and the tasks writing it.
        self.queue = WriteQueue()
        self.max_pending = MAX_PENDING
        self._runners: set[asyncio.Task[None]] = set()
        self._waiters = Waiters()

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
                async for page in list_pages(
                    self.requests.api, CRD_VERSION, plural, group=API_GROUP
                ):
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
                known = await self.requests.reread(key, known)
                if known is None:
                    self.known.pop(key, None)
            elif known is not None and known.data() == data:
                return False
            if known is None:
                sent, version = True, await self.requests.create(key, obj)
            else:
                # Equal but for how it is spelled (key order: the server sorts keys; a
                # null or an empty map it dropped) sends nothing: ours is remembered,
                # so that the next comparison is of bytes.
                sent, version = await self.requests.update(key, obj, known)
        except ApiException as exc:
            if exc.status != 404 or known is None:
                raise
            # Deleted behind our back: create it again (a 404 there means the CRD is gone).
            self.known.pop(key, None)
            sent, version = True, await self.requests.create(key, obj)
        self.uncertain.discard(key)
        self.known[key] = Known.of(obj, data, version)
        return sent

    async def delete(self, key: ObjKey) -> None:
        if key not in self.known:
            return
        await self.requests.delete(key)
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
        for _ in range(min(self.concurrency - len(self._runners), queue.ready())):
            self._runners.add(asyncio.create_task(self._runner()))
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
        await self._waiters.until(lambda: len(self.queue) < self.max_pending)

    async def drain(self) -> None:
        """Wait until everything handed over is written (or failed)."""
        await self._waiters.until(lambda: not len(self.queue))

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
        self._waiters.wake()

    async def _runner(self) -> None:
        """Write jobs until none may start. Several run at once; the token bucket still
        bounds the rate. A cancelled runner leaves its job to cancel(), which settled it."""
        while (job := self.queue.take()) is not None:
            failed_at = await self._write(job)
            self.queue.done(job.key)
            job.settle(failed_at)
            self._waiters.wake()
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
            if job.body is None:
                await self.delete(key)
            else:
                await self.put(job.body)
        except NotLeader:
            return self.backoffs.clock()
        except REQUEST_ERRORS as exc:
            if job.body is not None and may_have_landed(exc):
                self.uncertain.add(key)
            return self._failed(key, exc)
        except Exception as exc:  # a bug must not stop the writes of every other object
            if job.body is not None:
                self.uncertain.add(key)
            log.exception("status write failed unexpectedly", extra={"object": "/".join(key)})
            return self.backoffs.failed(key, Failure("error", False, type(exc).__name__))[0]
        else:
            self.backoffs.succeeded(key)
            if self.unreachable:
                self.unreachable = False
                log.info("API server reachable again; status writes resume")
            return None
        finally:
            if self.touched is not None:  # a load() runs: see there
                self.touched.add(key)

    async def probe(self) -> bool:
        """While a kind is not served, one cheap list tells when its CRD is back; True
        when something was unblocked (the caller then re-syncs everything)."""
        back = await self.requests.probe()
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
