"""PoolQueue on its own: dedup, leadership, backoff, requeue, depth."""

from __future__ import annotations

import time

from draview.controller import metrics
from draview.controller.queue import QUEUE, PoolQueue, Role

A, B = ("d.example.com", "a"), ("d.example.com", "b")


def _queue(leader: bool = True) -> PoolQueue:
    return PoolQueue(Role(leader=leader))


def _depth() -> float:
    return float(metrics.QUEUE_DEPTH.labels(QUEUE)._value.get())


def test_a_key_is_queued_once_with_its_oldest_mark() -> None:
    q = _queue()
    q.mark([A])
    first = q.dirty[A]
    q.mark([A, B])
    assert q.dirty[A] == first and set(q.dirty) == {A, B}
    assert _depth() == 2


def test_a_standby_queues_nothing() -> None:
    q = _queue(leader=False)
    q.mark([A])
    assert not q.dirty
    q.requeue({A: 1.0})
    assert not q.dirty


def test_a_deferred_key_is_not_due_until_its_time() -> None:
    q = _queue()
    q.defer(A, time.monotonic() + 60)
    q.mark([B])
    assert set(q.take_due()) == {B}
    assert set(q.dirty) == {A} and not q.any_due()
    q.defer(A, time.monotonic() - 1)  # the later of two deadlines stands
    assert not q.any_due()
    assert set(q.take_all()) == {A} and not q.due


def test_requeue_keeps_the_oldest_mark_and_clear_empties() -> None:
    q = _queue()
    q.mark([A])
    batch = q.take_due()
    q.mark([A])
    q.requeue(batch)
    assert q.dirty[A] == batch[A]
    assert q.staleness() >= 0
    q.clear()
    assert not q.dirty and _depth() == 0 and q.staleness() == 0.0
