"""Batches: a pool whose computation raises is isolated, a failed pool backs off without
delaying others, and a batch cancelled at shutdown puts its pools back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from builders import DRIVER, device, rslice
from kubernetes_asyncio.client.exceptions import ApiException

from draview.controller import metrics
from draview.controller import reconcile as core
from draview.controller.core import Controller, Settings
from draview.controller.known import Known
from draview.controller.ratelimit import TokenBucket
from draview.controller.status_requests import StatusRequests
from draview.controller.writequeue import ObjKey, Ticket
from draview.controller.writer import Writer, obj_key


class RecordingWriter(Writer):
    """The real hand-over and queue; each batch's pools are recorded, and its writes
    succeed (remembered as written), fail or wait as the test says."""

    def __init__(self) -> None:
        super().__init__(None, TokenBucket(1000, 1000))  # type: ignore[arg-type]
        self.batches: list[list[str]] = []
        self.fail: set[str] = set()  # pools whose objects fail
        self.block: asyncio.Event | None = None
        self.entered = asyncio.Event()
        self.removed: list[ObjKey] = []
        self.fail_keys: set[ObjKey] = set()  # objects whose deletes fail

    async def load(self) -> None:
        return None  # `known` is what the test put there

    def submit(
        self, desired: Any, removed: Any, started: float | None = None, then: Any = None
    ) -> Ticket:
        desired = list(desired)
        self.batches.append(sorted({o["spec"]["pool"] for o in desired}))
        self.removed = list(removed)
        return super().submit(desired, self.removed, started, then)

    async def put(self, obj: dict[str, Any]) -> bool:
        self.entered.set()
        if self.block is not None:
            await self.block.wait()
        if obj["spec"]["pool"] in self.fail:
            raise ApiException(status=503, reason="busy")
        self.known[obj_key(obj)] = Known.of(obj)
        return True

    async def delete(self, key: ObjKey) -> None:
        if key in self.fail_keys:
            raise ApiException(status=503, reason="busy")
        self.known.pop(key, None)


def controller(*pools: str) -> tuple[Controller, RecordingWriter]:
    writer = RecordingWriter()
    ctl = Controller(writer, Settings(claim_events=False))
    ctl.leader = True
    for p in pools:
        ctl.ingest.slice_event("ADDED", rslice(p, [device("d")], pool=p))
    return ctl, writer


def _break_pool(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """compute_pool raises for the pool `name`, as an engine bug would."""
    real = core.compute_pool

    def broken(key: Any, *args: Any, **kw: Any) -> Any:
        if key[1] == name:
            raise ZeroDivisionError("bug")
        return real(key, *args, **kw)

    monkeypatch.setattr(core, "compute_pool", broken)


async def test_a_pool_whose_computation_raises_does_not_stop_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _break_pool(monkeypatch, "bad")
    ctl, writer = controller("bad", "good")
    before = metrics.COMPUTE_ERRORS._value.get()
    await ctl.worker.flush()
    assert writer.batches == [["good"]]
    assert metrics.COMPUTE_ERRORS._value.get() == before + 1
    assert (DRIVER, "good") in ctl.reconciler.results and (
        DRIVER,
        "bad",
    ) not in ctl.reconciler.results


async def test_a_full_sync_never_prunes_the_objects_of_a_pool_it_could_not_compute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctl, writer = controller("bad", "good")
    # What the server holds: an object of the pool that will fail, and one with no source.
    writer.known = {
        ("resourcepoolstatuses", f"obj-{p}"): Known.of({"spec": {"driver": DRIVER, "pool": p}})
        for p in ("bad", "gone")
    }
    _break_pool(monkeypatch, "bad")
    await ctl.worker.full_sync()
    assert writer.removed == [("resourcepoolstatuses", "obj-gone")]


async def test_a_failed_pool_backs_off_and_never_delays_another() -> None:
    ctl, writer = controller("fails", "fine")
    writer.fail = {"fails"}
    await ctl.worker.flush()
    await writer.drain()
    assert (DRIVER, "fails") in ctl.queue.dirty and ctl.queue.due[
        (DRIVER, "fails")
    ] > time.monotonic()
    ctl.ingest.slice_event("MODIFIED", {**rslice("fine", [device("e")], pool="fine")})
    await ctl.worker.flush()  # "fails" is not due: only "fine" is recomputed and written
    assert writer.batches == [["fails", "fine"], ["fine"]]
    ctl.queue.due[(DRIVER, "fails")] = 0.0
    await ctl.worker.flush()
    assert writer.batches[-1] == ["fails"]


async def test_a_failed_delete_is_retried_with_its_pool_once_due() -> None:
    ctl, writer = controller("live")
    gone = ("resourcepoolstatuses", "obj-gone")
    writer.known = {gone: Known.of({"spec": {"driver": DRIVER, "pool": "gone"}})}
    writer.fail_keys = {gone}
    await ctl.worker.full_sync()
    assert writer.removed == [gone]
    assert ctl.queue.due[(DRIVER, "gone")] > time.monotonic()  # backing off, not forgotten
    writer.fail_keys = set()
    ctl.queue.due[(DRIVER, "gone")] = 0.0
    writer.backoffs.clear()  # its backoff is over too
    await ctl.worker.flush()
    await writer.drain()
    assert writer.removed == [gone] and not ctl.queue.dirty and gone not in writer.known


async def test_a_batch_cancelled_while_judged_puts_its_pools_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctl, writer = controller("a", "b")
    judging = asyncio.Event()

    async def slow(keys: Any) -> Any:
        judging.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(ctl.reconciler, "compute_in_steps", slow)
    batch = asyncio.create_task(ctl.worker.flush())
    await judging.wait()
    assert not ctl.queue.dirty  # taken off the dirty set for the batch
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    assert set(ctl.queue.dirty) == {(DRIVER, "a"), (DRIVER, "b")}
    monkeypatch.undo()
    assert not await ctl.worker.flush_due()  # the final flush writes them
    assert writer.batches[-1] == ["a", "b"] and not ctl.queue.dirty


async def test_writes_cut_short_at_shutdown_put_their_pools_back() -> None:
    ctl, writer = controller("a", "b")
    writer.block = asyncio.Event()
    await ctl.worker.flush()  # handed over: the writes wait in flight
    await writer.entered.wait()
    assert not ctl.queue.dirty
    ctl.worker.interrupt()  # the shutdown deadline passed
    assert set(ctl.queue.dirty) == {(DRIVER, "a"), (DRIVER, "b")}
    assert not writer.queue and not writer.known
    writer.block = None
    assert not await ctl.worker.flush_due()  # a later flush writes them after all
    assert len(writer.known) == 4 and not ctl.queue.dirty


async def test_a_long_computation_lets_other_tasks_run() -> None:
    """The elector's renewal must get the loop during a full sync of many pools."""
    ctl, _ = controller(*(f"p{i:03d}" for i in range(3 * core.COMPUTE_STEP)))
    turns = 0

    async def other() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    await asyncio.sleep(0)
    before = turns
    desired, _ = await ctl.reconciler.compute_in_steps(ctl.store.pools())
    task.cancel()
    assert len(desired) == 2 * 3 * core.COMPUTE_STEP  # pool and slice status per pool
    assert turns - before >= 2


async def test_a_full_sync_writes_in_chunks_pools_the_server_shows_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from draview.controller import worker as worker_module
    from draview.engine.objects import pool_object_name

    monkeypatch.setattr(worker_module, "SYNC_CHUNK", 2)
    ctl, writer = controller("a", "b", "c", "d", "e")
    shown = ("resourcepoolstatuses", pool_object_name(DRIVER, "e"))
    writer.known = {shown: Known.of({"spec": {"driver": DRIVER, "pool": "e"}})}
    await ctl.worker.full_sync()
    # Never every pool's objects at once; "e", which the server shows, first.
    assert writer.batches[:3] == [["a", "e"], ["b", "c"], ["d"]]
    assert ctl.role.synced


class _AnyApi:
    def __getattr__(self, name: str) -> None:
        return None


class _AnsweringRequests(StatusRequests):
    async def _call(self, verb: str, kind: str, fn: Any, *args: Any, **kw: Any) -> bytes:
        return b'{"metadata": {"resourceVersion": "1"}}'


class ServerWriter(Writer):
    """The real writer's put and compare; the server holds what it was sent, but for
    what a test edits or deletes behind the operator's back."""

    requests_class = _AnsweringRequests

    def __init__(self) -> None:
        super().__init__(_AnyApi(), TokenBucket(1e6, 1_000_000))  # type: ignore[arg-type]
        self.edited: dict[ObjKey, dict[str, Any]] = {}
        self.deleted: set[ObjKey] = set()

    async def load(self) -> None:
        self.known = {
            k: Known.of(self.edited.pop(k)) if k in self.edited else v
            for k, v in self.known.items()
            if k not in self.deleted
        }
        self.deleted = set()


async def test_a_full_sync_judges_only_pools_changed_or_not_as_written_on_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from draview.engine.objects import pool_object_name

    writer = ServerWriter()
    ctl = Controller(writer, Settings(claim_events=False))
    ctl.leader = True
    for p in ("a", "b", "c", "d"):
        ctl.ingest.slice_event("ADDED", rslice(p, [device("d")], pool=p))
    judged: list[str] = []
    real = ctl.reconciler.compute

    def spy(keys: Any) -> Any:
        keys = list(keys)
        judged.extend(sorted(k[1] for k in keys))
        return real(keys)

    monkeypatch.setattr(ctl.reconciler, "compute", spy)
    await ctl.worker.full_sync()
    assert sorted(judged) == ["a", "b", "c", "d"]
    judged.clear()
    await ctl.worker.full_sync()  # a re-list of an unchanged cluster
    assert judged == []
    ctl.ingest.slice_event("MODIFIED", rslice("a", [device("e")], pool="a"))
    pool_b = ("resourcepoolstatuses", pool_object_name(DRIVER, "b"))
    writer.edited[pool_b] = {"spec": {"driver": DRIVER, "pool": "b"}, "status": {}}
    writer.deleted = {("resourcepoolstatuses", pool_object_name(DRIVER, "c"))}
    await ctl.worker.full_sync()
    assert sorted(judged) == ["a", "b", "c"]
    assert writer.known[pool_b].value()["status"]["summary"]["totalDevices"] == 1


def test_a_full_sync_fixes_what_the_server_shows_before_creating_new_pools() -> None:
    ctl = Controller(Writer(None, TokenBucket(1, 1)), Settings())  # type: ignore[arg-type]
    keys = {(DRIVER, "a"), (DRIVER, "b"), (DRIVER, "c")}
    assert ctl.worker._sync_order(keys) == sorted(keys)  # nothing on the server yet
    shown = ("resourcepoolstatuses", core.pool_object_name(DRIVER, "c"))
    ctl.writer.known[shown] = Known(b"{}", (DRIVER, "c"))
    assert ctl.worker._sync_order(keys) == [(DRIVER, "c"), (DRIVER, "a"), (DRIVER, "b")]
