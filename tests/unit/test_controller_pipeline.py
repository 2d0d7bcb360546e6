"""Batches handed over while the last ones are still being written: the next batch is
judged and written meanwhile, yet each object has one write in flight at a time, a newer
body replaces a waiting one, changes go before creations, the fence and a lost Lease stop
what waits, and shutdown waits for (or cuts short and puts back) what was handed over."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from builders import DRIVER, device, rslice
from test_controller_batches import RecordingWriter, controller
from test_controller_writer import OBJ, FakeApi

from draview.controller.known import Known
from draview.controller.lifecycle import shutdown
from draview.controller.ratelimit import TokenBucket
from draview.controller.writer import Writer

PLURAL = "resourcepoolstatuses"


def body(name: str, total: int) -> dict[str, Any]:
    return {
        **OBJ,
        "metadata": {**OBJ["metadata"], "name": name},
        "status": {"summary": {"totalDevices": total}},
    }


class GatedApi(FakeApi):
    """Each request for an object named in `gates` waits for its gate; records what was
    sent per object and the most requests ever in flight for one object."""

    def __init__(self) -> None:
        super().__init__()
        self.gates: dict[str, asyncio.Event] = {}
        self.sent: list[tuple[str, Any]] = []  # (object name, status sent)
        self.busy: dict[str, int] = {}
        self.most = 0

    def __getattr__(self, method: str) -> Any:
        answer = super().__getattr__(method)

        async def call(*args: Any, **kw: Any) -> Any:
            payload = args[-1] if isinstance(args[-1], dict) else {}
            name = payload["metadata"]["name"] if method.startswith("create") else args[3]
            self.busy[name] = self.busy.get(name, 0) + 1
            self.most = max(self.most, self.busy[name])
            try:
                gate = self.gates.get(name)
                if gate is not None:
                    await gate.wait()
                self.sent.append((name, payload.get("status")))
                return await answer(*args, **kw)
            finally:
                self.busy[name] -= 1

        return call


def gated_writer(*, concurrency: int = 8, may_write: Any = lambda: True) -> tuple[Writer, GatedApi]:
    api = GatedApi()
    writer = Writer(api, TokenBucket(1000, 1000), concurrency, may_write)  # type: ignore[arg-type]
    return writer, api


async def settled(writer: Writer) -> None:
    await asyncio.wait_for(writer.drain(), 2)


async def test_the_next_batch_is_judged_and_written_while_the_last_is_in_flight() -> None:
    ctl, writer = controller("slow")
    slow = writer.block = asyncio.Event()  # every write waits for it...
    await asyncio.wait_for(ctl.worker.flush(), 1)  # ...yet the batch is only handed over
    await writer.entered.wait()
    writer.block = None  # writes from now on go through at once
    ctl.ingest.slice_event("ADDED", rslice("fast", [device("d")], pool="fast"))
    await asyncio.wait_for(ctl.worker.flush(), 1)
    await asyncio.sleep(0.01)
    assert writer.batches == [["slow"], ["fast"]]
    assert {o.pool for o in writer.known.values()} == {(DRIVER, "fast")}
    slow.set()
    await settled(writer)
    assert {o.pool for o in writer.known.values()} == {(DRIVER, "fast"), (DRIVER, "slow")}


async def test_one_write_per_object_at_a_time_and_the_newest_body_wins() -> None:
    writer, api = gated_writer()
    name = "gpu-pool-1234"
    writer.known[(PLURAL, name)] = Known.of(body(name, 0))
    api.gates[name] = asyncio.Event()
    first = writer.submit([body(name, 1)], [])
    await asyncio.sleep(0.01)  # v1 is in flight, held at its gate
    second = writer.submit([body(name, 2)], [])
    third = writer.submit([body(name, 3)], [])
    await asyncio.sleep(0.01)
    assert second.done and not second.failed  # replaced by the third: nothing to write
    assert not first.done and not third.done
    api.gates[name].set()
    await settled(writer)
    assert api.most == 1
    assert api.sent == [
        (name, {"summary": {"totalDevices": 1}}),
        (name, {"summary": {"totalDevices": 3}}),
    ]
    assert writer.known[(PLURAL, name)].value()["status"] == {"summary": {"totalDevices": 3}}
    assert first.done and third.done


async def test_a_judgement_reads_the_body_handed_over_not_yet_written() -> None:
    writer, api = gated_writer()
    writer.known[(PLURAL, "x")] = Known.of(body("x", 0))
    api.gates["x"] = asyncio.Event()
    writer.submit([body("x", 1)], [])
    writer.submit([body("x", 2)], [])
    assert writer.previous_status((PLURAL, "x")) == {"summary": {"totalDevices": 2}}
    api.gates["x"].set()
    await settled(writer)
    assert writer.previous_status((PLURAL, "x")) == {"summary": {"totalDevices": 2}}


async def test_a_change_handed_over_later_is_written_before_waiting_creations() -> None:
    writer, api = gated_writer(concurrency=1)
    writer.known[(PLURAL, "shown")] = Known.of(body("shown", 0))
    api.gates["new-0"] = asyncio.Event()
    writer.submit([body(f"new-{i}", 1) for i in range(3)], [])  # first-time creations
    await asyncio.sleep(0.01)  # new-0 in flight; new-1, new-2 wait
    writer.submit([body("shown", 1)], [])
    api.gates["new-0"].set()
    await settled(writer)
    order = [n for n, _ in api.sent]
    assert order.index("shown") < order.index("new-1"), order


async def test_nothing_waiting_is_sent_once_the_fence_closes() -> None:
    leading = [True]
    writer, api = gated_writer(concurrency=1, may_write=lambda: leading[0])
    api.gates["a"] = asyncio.Event()
    batch = writer.submit([body("a", 1), body("b", 1)], [])
    await asyncio.sleep(0.01)  # a's create is in flight
    leading[0] = False  # the renew deadline passed
    api.gates["a"].set()
    await asyncio.wait_for(batch.wait(), 1)
    assert [n for n, _ in api.sent] == ["a"]  # a's status and b: never started
    assert set(batch.failed) == {(PLURAL, "a"), (PLURAL, "b")}


async def test_hand_over_waits_for_room() -> None:
    writer, api = gated_writer()
    writer.max_pending = 2
    api.gates["a"], api.gates["b"] = asyncio.Event(), asyncio.Event()
    writer.submit([body("a", 1), body("b", 1)], [])
    room = asyncio.create_task(writer.room())
    await asyncio.sleep(0.01)
    assert not room.done()  # two objects not written: the next chunk waits
    api.gates["a"].set()
    await asyncio.wait_for(room, 1)  # one written: room for more
    assert not api.gates["b"].is_set()
    api.gates["b"].set()
    await settled(writer)


async def test_a_full_sync_with_little_room_still_writes_every_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from draview.controller import worker as worker_module

    monkeypatch.setattr(worker_module, "SYNC_CHUNK", 2)
    ctl, writer = controller(*(f"p{i}" for i in range(7)))
    writer.max_pending = 1
    await asyncio.wait_for(ctl.worker.full_sync(), 2)
    assert len(writer.known) == 14 and not writer.queue and ctl.role.synced
    assert writer.batches[:4] == [["p0", "p1"], ["p2", "p3"], ["p4", "p5"], ["p6"]]


async def _shutdown(ctl: Any, deadline: float) -> None:
    async def kopf() -> None:
        return None

    tasks = [asyncio.create_task(kopf(), name="kopf")]
    await shutdown(ctl, None, tasks, deadline)


async def test_shutdown_waits_for_the_writes_handed_over() -> None:
    ctl, writer = controller("a", "b")
    writer.block = asyncio.Event()
    await ctl.worker.flush()
    await writer.entered.wait()
    assert not ctl.queue.dirty  # nothing left to judge: only writes in flight
    asyncio.get_running_loop().call_later(0.05, writer.block.set)
    await asyncio.wait_for(_shutdown(ctl, 5), 3)
    assert len(writer.known) == 4 and not writer.queue


async def test_shutdown_past_its_deadline_cancels_the_writes_and_puts_their_pools_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctl, writer = controller("a", "b")
    writer.block = asyncio.Event()  # never set: the API server does not answer
    await ctl.worker.flush()
    await writer.entered.wait()
    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(_shutdown(ctl, 0.1), 3)
    assert not writer.queue and not writer.known
    assert set(ctl.queue.dirty) == {(DRIVER, "a"), (DRIVER, "b")}
    late = [r for r in caplog.records if "shutdown deadline" in r.getMessage()]
    assert len(late) == 1 and getattr(late[0], "pools", None) == 2


async def test_a_lost_lease_stops_a_full_sync_that_waits_for_room() -> None:
    ctl, writer = controller(*(f"p{i}" for i in range(3)))
    assert isinstance(writer, RecordingWriter)
    writer.block = asyncio.Event()
    writer.max_pending = 1
    sync = asyncio.create_task(ctl.worker.full_sync())
    await writer.entered.wait()
    ctl.worker.step_down()
    await asyncio.wait_for(sync, 1)
    writer.block.set()
    await asyncio.sleep(0.01)
    assert not writer.known and not writer.queue and not ctl.role.synced
