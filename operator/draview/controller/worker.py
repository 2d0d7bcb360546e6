"""The worker: takes due pool keys off the queue, has them judged (reconcile.py) and hands
what changed to the writer; a full sync judges every pool and prunes orphans.

One writer at a time: a full sync and a batch must not interleave, or an older judgement
could land after a newer one. Only the leader writes; losing the Lease cancels the write
in flight.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any

from draview.controller import metrics
from draview.controller.known import Known
from draview.controller.queue import PoolQueue, Role
from draview.controller.reconcile import Judged, Reconciler
from draview.controller.writer import PLURALS, ObjKey, Writer, obj_key
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
        # The write under way (a batch or a full sync): cancelled when leadership is lost.
        self.inflight: asyncio.Task[Any] | None = None
        self.write_lock = asyncio.Lock()

    async def run(self, interval: float) -> None:
        """Every `interval`: judge and write the pools marked since."""
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
        async with self.write_lock:
            await self._flush()

    async def flush_due(self) -> bool:
        """Flush once (at shutdown); True while dirty pools remain that are due now."""
        await self.flush()
        return self.queue.any_due()

    async def _flush(self) -> None:
        if not self.queue.dirty or not self.role.leader:
            return
        batch = self.queue.take_due()
        if not batch:
            return
        try:
            oldest = min(batch.values())
            desired, removed = await self.reconciler.compute_in_steps(batch)
            self._rejudge_if_needed()
            metrics.SYNC_TOTAL.inc()
            failed = await self._write((desired, removed), started=oldest)
        except asyncio.CancelledError:
            self.queue.requeue(batch)  # shutdown: the final flush writes them
            raise
        self._retry_later(desired, failed)
        self.queue.report()

    async def full_sync(self) -> None:
        """After a (re)list or on becoming leader: learn the server, write differences,
        prune objects whose source is gone."""
        async with self.write_lock:
            await self._full_sync()

    async def _full_sync(self) -> None:
        before = dict(self.writer.known)
        await self.writer.load()
        dirty = set(self.queue.take_all())
        intact = self._intact(before, dirty)
        owned = self.reconciler.pool_objects
        for key in [k for k in owned if k not in intact]:
            del owned[key]
        keys = (self.reconciler.store.pools() | dirty) - intact
        remaining = dict.fromkeys(self._sync_order(keys), time.monotonic())
        wanted: set[ObjKey] = {o for key in intact for o in owned[key]}
        failed: dict[ObjKey, float] = {}
        try:
            # A chunk at a time: every pool's objects at once were the operator's peak
            # memory (all status bodies of the cluster, as dicts, at 65,000 nodes: GBs).
            while remaining:
                chunk = list(itertools.islice(remaining, SYNC_CHUNK))
                desired, removed = await self.reconciler.compute_in_steps(chunk)
                self._rejudge_if_needed()
                wanted.update(obj_key(o) for o in desired)
                failed_here = await self._write((desired, removed))
                self._retry_later(desired, failed_here)
                failed.update(failed_here)
                for key in chunk:
                    del remaining[key]
            failed_here = await self._write(([], self._orphans(wanted)))
            self._retry_later([], failed_here)
            failed.update(failed_here)
        except asyncio.CancelledError:
            self.queue.requeue(remaining)
            raise
        if failed:
            log.warning("full sync left failures", extra={"count": len(failed)})
        self.role.synced = self.role.leader  # leadership may have been lost while writing

    def _rejudge_if_needed(self) -> None:
        """1.34: the invalid pools nodes gather changed, and with them the devices of
        every pool (engine/aborts.py): the next batches judge them all again."""
        if self.reconciler.take_rejudge_all():
            self.queue.mark(self.reconciler.store.pools())

    def _intact(self, before: dict[ObjKey, Known], dirty: set[PoolKey]) -> set[PoolKey]:
        """Pools a full sync need not judge again: judged before, nothing they read has
        changed since (a change marks them dirty), and the server still holds every
        object of theirs as written (load() keeps our copy of an object that did not
        change). A periodic re-list of an unchanged cluster then judges nothing: at 20,000
        nodes it judged every pool, 20 s of CPU every --resync-interval."""
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
        return sorted(
            keys, key=lambda k: (("resourcepoolstatuses", pool_object_name(*k)) not in known, k)
        )

    def _orphans(self, wanted: set[ObjKey]) -> list[ObjKey]:
        """Objects on the server that no pool wants (and no broken pool may still own)."""
        broken = self.reconciler.broken
        return [
            k
            for k, known in self.writer.known.items()
            if k not in wanted and k[0] in PLURALS.values() and known.pool not in broken
        ]

    async def _write(self, judged: Judged, started: float | None = None) -> dict[ObjKey, float]:
        """Run the writes as their own task, so that losing leadership can cancel them
        (step_down) without cancelling the loop that waits for them."""
        task = asyncio.create_task(self.writer.apply(*judged, started=started))
        self.inflight = task
        try:
            return await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise  # we are being stopped (shutdown): the caller re-queues
            return {}  # step_down cancelled the writes: a new leader redoes them
        finally:
            self.inflight = None

    def _retry_later(self, desired: list[dict[str, Any]], failed: dict[ObjKey, float]) -> None:
        """A pool whose objects failed is judged again once the latest of them is due."""
        by_name = {obj_key(o): o for o in desired}
        for key, not_before in failed.items():
            pool = self._pool_of(key, by_name.get(key))
            if pool is not None:
                self.queue.defer(pool, not_before)

    def _pool_of(self, key: ObjKey, obj: dict[str, Any] | None) -> PoolKey | None:
        if obj is not None:
            return (obj["spec"]["driver"], obj["spec"]["pool"])
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
        if self.inflight is not None:
            self.inflight.cancel()  # writes in flight stop; the new leader redoes them
        self.queue.clear()
        self.reconciler.forget_all()
        metrics.STALENESS.set(0)
