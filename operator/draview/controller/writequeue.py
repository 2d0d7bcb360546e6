"""The status writes handed over and not yet done: one slot per object, like client-go's
work queue of keys (an object out for writing is never handed out again until it is done).

The worker judges a batch and hands its objects over without waiting for them to be
written, so that the next batch is judged while this one's requests are in flight:
waiting would make a change that arrives during a batch's writes wait for all of them
and an interval more. What keeps that safe:

- one write per object at a time: its requests, and what the writer learns from them,
  stay in order;
- the newest body wins: a newer body for an object that waits replaces the waiting one
  (written once, as last judged); one for an object in flight waits for that write;
- changes first: objects the server already shows, and deletes, are handed out before
  first-time creations, whatever batch they came from (after a re-list or a failover,
  what users see as wrong is fixed before what is new is created);
- tickets: each handed-over batch settles once each of its objects is written, has
  failed or was replaced by a newer body. A full sync and the shutdown flush wait for
  them; the worker puts the pools of failed objects back on its queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from draview.controller import metrics
from draview.controller.known import pool_of
from draview.engine.model import PoolKey

log = logging.getLogger("draview.writer")
ObjKey = tuple[str, str]  # (plural, name)


class Ticket:
    """One batch handed over for writing."""

    __slots__ = ("_done", "_left", "_open", "_then", "failed", "pools", "started")

    def __init__(self, started: float | None, then: Callable[[Ticket], None] | None) -> None:
        # Monotonic time of the batch's oldest change: how long until it was written.
        self.started = started
        self._then = then
        self._left = 0
        self._open = True
        self._done = asyncio.Event()
        # Objects not written, each with the monotonic time before which not to try again.
        self.failed: dict[ObjKey, float] = {}
        # The pool of each failed object whose body names one (a delete's has none).
        self.pools: dict[ObjKey, PoolKey] = {}

    def add(self) -> None:
        self._left += 1

    def close(self) -> None:
        """Every object is added: settled once each of them is."""
        self._open = False
        self._finish_if_done()

    def settle(self, key: ObjKey, body: dict[str, Any] | None, failed_at: float | None) -> None:
        if failed_at is not None:
            self.failed[key] = failed_at
            pool = pool_of(body) if body is not None else None
            if pool is not None:
                self.pools[key] = pool
        self._left -= 1
        self._finish_if_done()

    def _finish_if_done(self) -> None:
        if self._open or self._left or self._done.is_set():
            return
        self._done.set()
        if self.started is not None:
            metrics.UPDATE_DURATION.observe(time.monotonic() - self.started)
        if self._then is not None:
            try:
                self._then(self)
            except Exception:  # settled from inside a write: a bug must not stop the writer
                log.exception("handling written batch failed")

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> None:
        await self._done.wait()


class Job:
    """Write `body` (or delete, when None) for one object, on behalf of `ticket`."""

    __slots__ = ("body", "key", "ticket")

    def __init__(self, key: ObjKey, body: dict[str, Any] | None, ticket: Ticket) -> None:
        self.key = key
        self.body = body
        self.ticket = ticket

    def settle(self, failed_at: float | None = None) -> None:
        self.ticket.settle(self.key, self.body, failed_at)


class WriteQueue:
    """Jobs waiting (the newest per object) and in flight (at most one per object)."""

    def __init__(self) -> None:
        self.waiting: dict[ObjKey, Job] = {}
        self.active: dict[ObjKey, Job] = {}
        # Waiting objects that may be handed out, in order: changes and deletes, then
        # first-time creations (dicts as ordered sets).
        self._first: dict[ObjKey, None] = {}
        self._later: dict[ObjKey, None] = {}

    def __len__(self) -> int:
        return len(self.waiting) + len(self.active)

    def ready(self) -> int:
        return len(self._first) + len(self._later)

    def put(self, job: Job, first: bool) -> None:
        """Queue `job`; a job already waiting for its object is replaced (and settled:
        the newer body is written in its place)."""
        key = job.key
        old = self.waiting.get(key)
        self.waiting[key] = job
        if old is not None:
            old.settle()
            if first and key in self._later:
                del self._later[key]
                self._first[key] = None
            return
        if key not in self.active:
            (self._first if first else self._later)[key] = None

    def take(self) -> Job | None:
        """The next job to write, now in flight; None when none may start."""
        for ready in (self._first, self._later):
            if ready:
                key = next(iter(ready))
                del ready[key]
                job = self.active[key] = self.waiting.pop(key)
                return job
        return None

    def done(self, key: ObjKey) -> None:
        """The write of `key` ended: a newer body that waited for it may go (first: the
        object was written, or tried, once already)."""
        del self.active[key]
        if key in self.waiting:
            self._first[key] = None

    def latest(self, key: ObjKey) -> Job | None:
        """The newest job for `key`, waiting or in flight."""
        return self.waiting.get(key) or self.active.get(key)

    def clear(self) -> list[Job]:
        """Drop everything; returns the jobs dropped (in flight first)."""
        jobs = [*self.active.values(), *self.waiting.values()]
        self.waiting, self.active = {}, {}
        self._first, self._later = {}, {}
        return jobs


class Waiters:
    """Tasks waiting for the queue to shrink (room for a hand-over, or a drain): woken
    whenever a write is done, each checks again whether what it waits for holds."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[None]] = []

    async def until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            waiter = asyncio.get_running_loop().create_future()
            self._futures.append(waiter)
            await waiter

    def wake(self) -> None:
        futures, self._futures = self._futures, []
        for waiter in futures:
            if not waiter.done():
                waiter.set_result(None)
