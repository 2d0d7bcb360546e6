"""The judgement queue: pool keys waiting to be judged, like client-go's rate-limited work
queue of keys. A key is queued once however often it is marked (the oldest mark counts
for staleness); a key whose last write failed waits until it is due again."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from draview.controller import metrics
from draview.engine.model import PoolKey

QUEUE = "resourceslice_status"  # the seed's workqueue_depth{name} label


@dataclass
class Role:
    """What this replica is doing, shared by the queue, the worker and the Events: only
    the leader queues and writes, and `synced` once its first full sync is written."""

    leader: bool = False
    synced: bool = False


class PoolQueue:
    def __init__(self, role: Role) -> None:
        self.role = role
        self.dirty: dict[PoolKey, float] = {}  # key -> monotonic time of its oldest mark
        # Pools whose objects failed to write: not taken before this monotonic time.
        self.due: dict[PoolKey, float] = {}

    def mark(self, keys: Iterable[PoolKey]) -> None:
        # A standby keeps its store warm but queues nothing: on becoming leader it
        # recomputes every pool anyway, and its queue metrics stay truthful (0).
        if not self.role.leader:
            return
        now = time.monotonic()
        for key in keys:
            self.dirty.setdefault(key, now)
        self.report()

    def take_due(self) -> dict[PoolKey, float]:
        """Take the dirty pools not backing off out of the queue."""
        now = time.monotonic()
        batch = {k: t for k, t in self.dirty.items() if self.due.get(k, 0.0) <= now}
        for key in batch:
            del self.dirty[key]
            self.due.pop(key, None)
        return batch

    def take_all(self) -> dict[PoolKey, float]:
        """Everything, backing off or not: a full sync judges each of them again."""
        batch, self.dirty = self.dirty, {}
        self.due.clear()
        return batch

    def requeue(self, batch: dict[PoolKey, float]) -> None:
        """Put pools back that were taken but not written (cancelled mid-write)."""
        if not self.role.leader:
            return
        for key, seen in batch.items():
            self.dirty[key] = min(seen, self.dirty.get(key, seen))

    def defer(self, key: PoolKey, not_before: float) -> None:
        """Judge `key` again, not before `not_before` (its write failed)."""
        self.due[key] = max(not_before, self.due.get(key, 0.0))
        self.mark([key])

    def any_due(self) -> bool:
        now = time.monotonic()
        return any(self.due.get(k, 0.0) <= now for k in self.dirty)

    def clear(self) -> None:
        self.dirty.clear()
        self.due.clear()
        self.report()

    def report(self) -> None:
        metrics.QUEUE_DEPTH.labels(QUEUE).set(len(self.dirty))

    def staleness(self) -> float:
        oldest = min(self.dirty.values(), default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest
