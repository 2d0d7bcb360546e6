"""The worker: takes due pool keys off the queue, has them judged (reconcile.py) and hands
what changed to the writer; a full sync judges every pool and prunes orphans.

A batch is handed over, not waited for: the next one is judged while its writes are in
flight (the writer keeps each object's writes in order, the newest body winning). One
judge at a time: a full sync and a batch never interleave, so that objects are handed
over in the order they were judged. Only the leader writes; losing the Lease cancels the
writes in flight and drops those waiting.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time

from draview.api.status import PLURALS, POOL_STATUS_PLURAL
from draview.controller import metrics
from draview.controller.known import Known
from draview.controller.queue import PoolQueue, Role
from draview.controller.reconcile import Judged, Reconciler
from draview.controller.writequeue import ObjKey, Ticket
from draview.controller.writer import Writer, obj_key
from draview.engine.model import PoolKey
from draview.engine.objects import pool_object_name

log = logging.getLogger("draview.controller")

# Pools judged and written together by a full sync.
SYNC_CHUNK = 500


class Worker:
    def __init__(self, queue: PoolQueue, reconciler: Reconciler, writer: Writer) -> None:
        self.queue = queue
        self.role: Role = queue.role
        self.reconciler = reconciler
        self.writer = writer
        # Held while judging and handing over (a batch or a full sync), not while writing.
        self.judge_lock = asyncio.Lock()
        # One full sync at a time (the periodic re-list and the CRD probe both start one).
        self.sync_lock = asyncio.Lock()

    async def run(self, interval: float) -> None:
        """Every `interval`: judge the pools marked since and hand them to the writer."""
        while True:
            await asyncio.sleep(interval)
            metrics.STALENESS.set(self.queue.staleness())
            try:
                await self.flush()
            except Exception:  # one bad batch must never stop the operator
                log.exception("batch failed")

    async def flush(self) -> None:
        if not self.queue.dirty or not self.role.leader:
            return
        async with self.judge_lock:
            await self._flush()

    async def flush_due(self) -> bool:
        """Flush once and wait for every write handed over (at shutdown); True while
        dirty pools remain that are due now."""
        await self.flush()
        await self.writer.drain()
        return self.queue.any_due()

    def interrupt(self) -> None:
        """The shutdown deadline passed: the writes still in flight stop, and their pools
        go back on the queue (what the next leader writes)."""
        self.writer.cancel()

    async def _flush(self) -> None:
        if not self.queue.dirty or not self.role.leader:
            return
        batch = self.queue.take_due()
        if not batch:
            return
        try:
            judged = await self.reconciler.compute_in_steps(batch)
            self._rejudge_if_needed()
            metrics.SYNC_TOTAL.inc()
            await self.writer.room()
        except asyncio.CancelledError:
            self.queue.requeue(batch)  # shutdown: the final flush writes them
            raise
        if self.role.leader:  # lost while waiting for room: the new leader judges anew
            self._hand_over(judged, started=min(batch.values()))
        self.queue.report()

    async def full_sync(self) -> None:
        """After a (re)list or on becoming leader: learn the server, write differences,
        prune objects whose source is gone; returns once all of it is written.

        The first sync of a leadership holds the judge lock throughout: nothing is
        judged before the server's copies are known. Later ones (the periodic re-list,
        CRDs back) wait for the writer to catch up, read the server's copies and wait
        for their writes while batches go on: in a large cluster that read and those writes
        take many seconds, and claim changes must not wait behind them. Only judging and
        handing over hold the lock."""
        async with self.sync_lock:
            if not self.role.synced:
                async with self.judge_lock:
                    await self.writer.drain()  # nothing lands while the server is read
                    tickets = await self._judge_all(await self._load())
                    await self._settle(tickets)
                return
            # Read once the writer has caught up: a list of every status object beside a
            # backlog of writes only slows both on an API server that is already behind.
            await self.writer.drain()
            before = await self._load()  # writes meanwhile are kept (Writer.load)
            async with self.judge_lock:
                tickets = await self._judge_all(before)
            await self._settle(tickets)

    async def _load(self) -> dict[ObjKey, Known]:
        """What the writer knew, then what the server holds."""
        before = dict(self.writer.known)
        await self.writer.load()
        return before

    async def _settle(self, tickets: list[Ticket] | None) -> None:
        if tickets is None:
            return  # leadership lost: the next leader syncs
        for ticket in tickets:
            await ticket.wait()
        failed = sum(len(t.failed) for t in tickets)
        if failed:
            log.warning("full sync left failures", extra={"count": failed})
        self.role.synced = self.role.leader  # leadership may have been lost while writing

    async def _judge_all(self, before: dict[ObjKey, Known]) -> list[Ticket] | None:
        """Judge every pool not intact and hand it over, then the orphans' deletes;
        the tickets of all of it (None: leadership lost while waiting for room)."""
        dirty = set(self.queue.take_all())
        intact = self._intact(before, dirty)
        owned = self.reconciler.pool_objects
        for key in [k for k in owned if k not in intact]:
            del owned[key]
        keys = (self.reconciler.store.pools() | dirty) - intact
        remaining = dict.fromkeys(self._sync_order(keys), time.monotonic())
        wanted: set[ObjKey] = {o for key in intact for o in owned[key]}
        tickets: list[Ticket] = []
        try:
            # A chunk at a time, judged while the chunk before is written: every pool's
            # objects at once would be the operator's peak memory (all status bodies of the
            # cluster, as dicts: gigabytes at 65,000 nodes).
            while remaining:
                chunk = list(itertools.islice(remaining, SYNC_CHUNK))
                desired, removed = await self.reconciler.compute_in_steps(chunk)
                self._rejudge_if_needed()
                wanted.update(obj_key(o) for o in desired)
                await self.writer.room()
                if not self.role.leader:
                    return None  # lost while waiting: the next leader syncs
                tickets.append(self._hand_over((desired, removed)))
                for key in chunk:
                    del remaining[key]
        except asyncio.CancelledError:
            self.queue.requeue(remaining)
            raise
        tickets.append(self._hand_over(([], self._orphans(wanted))))
        return tickets

    def _rejudge_if_needed(self) -> None:
        """1.34: the invalid pools nodes gather changed, and with them the devices of
        every pool (engine/aborts.py): the next batches judge them all again."""
        if self.reconciler.take_rejudge_all():
            self.queue.mark(self.reconciler.store.pools())

    def _intact(self, before: dict[ObjKey, Known], dirty: set[PoolKey]) -> set[PoolKey]:
        """Pools a full sync need not judge again: judged before, nothing they read has
        changed since (a change marks them dirty), and the server still holds every
        object of theirs as written (load() keeps our copy of an object that did not
        change). A periodic re-list of an unchanged cluster then judges nothing, rather than
        every pool every --resync-interval."""
        known, results, broken = self.writer.known, self.reconciler.results, self.reconciler.broken
        return {
            key
            for key, objs in self.reconciler.pool_objects.items()
            if objs
            and key not in dirty
            and key in results
            and key not in broken
            and all(o in before and known.get(o) is before[o] for o in objs)
        }

    def _sync_order(self, keys: set[PoolKey]) -> list[PoolKey]:
        """Pools the server already shows first, new pools last: after a re-list or a
        failover, what users see as wrong is fixed before what is new is created."""
        known = self.writer.known
        if not known:  # a first sync with nothing on the server: no name to look up
            return sorted(keys)
        return sorted(
            keys, key=lambda k: ((POOL_STATUS_PLURAL, pool_object_name(*k)) not in known, k)
        )

    def _orphans(self, wanted: set[ObjKey]) -> list[ObjKey]:
        """Objects on the server that no pool wants (and no broken pool may still own)."""
        broken = self.reconciler.broken
        return [
            k
            for k, known in self.writer.known.items()
            if k not in wanted and k[0] in PLURALS.values() and known.pool not in broken
        ]

    def _hand_over(self, judged: Judged, started: float | None = None) -> Ticket:
        return self.writer.submit(*judged, started=started, then=self._retry_later)

    def _retry_later(self, ticket: Ticket) -> None:
        """A pool whose objects failed is judged again once the latest of them is due."""
        for key, not_before in ticket.failed.items():
            pool = ticket.pools.get(key) or self._pool_of_deleted(key)
            if pool is not None:
                self.queue.defer(pool, not_before)

    def _pool_of_deleted(self, key: ObjKey) -> PoolKey | None:
        # A failed delete: the object stays one of its pool's, so that the pool's next
        # judgement, once due, deletes it again. (Left to the periodic re-list, an orphan
        # outlived a 429 storm by up to --resync-interval.)
        known = self.writer.known.get(key)
        pool = known.pool if known is not None else None
        if pool is None:
            return None
        self.reconciler.pool_objects.setdefault(pool, set()).add(key)
        return pool

    def step_down(self) -> None:
        """Lost the lease: stop writing and stop exporting pool series (the new leader
        exports them now)."""
        self.role.leader = False
        self.role.synced = False
        self.writer.cancel()  # writes in flight stop, those waiting go; the new leader redoes them
        self.queue.clear()
        self.reconciler.forget_all()
        metrics.STALENESS.set(0)
