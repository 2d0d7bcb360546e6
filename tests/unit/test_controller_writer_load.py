"""Reading the server's copies while writes go on: a periodic re-list must not stall claim
changes, and must not take a page that predates a write for what the server holds."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from test_controller_writer import _Response
from test_controller_writer_uncertain import KEY, A, B, Server, writer_for

import draview.controller.writer as writer_module
from draview.controller.core import Controller, Settings
from draview.controller.ratelimit import TokenBucket
from draview.controller.writequeue import Job, Ticket
from draview.controller.writer import Writer


def named(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "name": name}}


def job(key: tuple[str, str], body: dict[str, Any] | None) -> Job:
    return Job(key, body, Ticket(None, None))


class Deletable(Server):
    def _delete_cluster_custom_object(self, g: str, v: str, p: str, name: str) -> _Response:
        return self._answer(self.objects.pop(name))


class SlowPages:
    """list_pages over a snapshot of the server taken when the list starts, one object a
    page, handed out only once `go` is set (as a list racing with writes)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.go = asyncio.Event()
        self.started = asyncio.Event()

    async def __call__(
        self, api: Any, version: str, plural: str, **_: Any
    ) -> AsyncIterator[list[dict[str, Any]]]:
        if not self.started.is_set():  # the load's first list: the server as it is now
            self.snapshot = [copy.deepcopy(o) for o in self.server.objects.values()]
            self.started.set()
        for obj in self.snapshot if plural == KEY[0] else ():  # the model holds one kind
            await self.go.wait()
            yield [obj]


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> SlowPages:
    server = Deletable()
    pages = SlowPages(server)
    monkeypatch.setattr(writer_module, "list_pages", pages)
    return pages


async def test_what_is_written_while_the_server_is_read_is_kept(slow: SlowPages) -> None:
    writer = writer_for(slow.server)
    gone, other = ("resourcepoolstatuses", "gone"), ("resourcepoolstatuses", "other")
    for obj in (A, named(A, "gone"), named(A, "other")):
        await writer.put(obj)
    writer.uncertain.add(other)  # in doubt before the list: the list settles it
    load = asyncio.create_task(writer.load())
    await asyncio.wait_for(slow.started.wait(), 5)
    # Meanwhile a change and a delete are written, and a new object's create lands
    # without an answer (in doubt).
    assert await writer._write(job(KEY, B)) is None
    assert await writer._write(job(gone, None)) is None
    slow.server.lose_answer.add("create_cluster_custom_object")
    doubtful = ("resourcepoolstatuses", "doubtful")
    assert await writer._write(job(doubtful, named(B, "doubtful"))) is not None
    slow.go.set()
    await load
    assert slow.server.status() == B["status"]
    assert writer.known[KEY].value()["status"] == B["status"]  # not the page's A
    assert gone not in writer.known  # listed before it was deleted: not brought back
    assert writer.known[other].value()["status"] == A["status"]
    assert writer.uncertain == {doubtful}
    assert writer.touched is None


async def test_a_change_after_the_read_is_compared_with_the_write_not_the_page(
    slow: SlowPages,
) -> None:
    # Were the page's copy (A) kept, writing A again would compare equal and send
    # nothing, leaving B on the server for good.
    writer = writer_for(slow.server)
    await writer.put(A)
    await writer.put(named(A, "second"))
    load = asyncio.create_task(writer.load())
    await asyncio.wait_for(slow.started.wait(), 5)
    await writer._write(job(KEY, B))
    slow.go.set()
    await load
    assert await writer.put(A)
    assert slow.server.status() == A["status"]


async def test_one_load_at_a_time(slow: SlowPages) -> None:
    writer = writer_for(slow.server)
    await writer.put(A)
    await writer.put(named(A, "second"))
    first = asyncio.create_task(writer.load())
    await asyncio.wait_for(slow.started.wait(), 5)
    with pytest.raises(RuntimeError):
        await asyncio.wait_for(writer.load(), 5)
    slow.go.set()
    await first


def _controller(writer: Writer) -> Controller:
    ctl = Controller(writer, Settings())
    ctl.role.leader = True
    return ctl


@pytest.mark.parametrize("synced", [False, True])
async def test_only_a_later_sync_lets_batches_judge_while_the_server_is_read(
    synced: bool,
) -> None:
    writer = Writer(None, TokenBucket(1000, 1000))  # type: ignore[arg-type]
    reading, go = asyncio.Event(), asyncio.Event()

    async def load() -> None:
        reading.set()
        await go.wait()

    writer.load = load  # type: ignore[method-assign]
    ctl = _controller(writer)
    ctl.role.synced = synced
    sync = asyncio.create_task(ctl.worker.full_sync())
    await asyncio.wait_for(reading.wait(), 5)
    # The first sync of a leadership judges nothing else until the server is known.
    assert ctl.worker.judge_lock.locked() is not synced
    go.set()
    await asyncio.wait_for(sync, 5)
    assert ctl.role.synced and not ctl.worker.judge_lock.locked()


async def test_full_syncs_run_one_at_a_time() -> None:
    writer = Writer(None, TokenBucket(1000, 1000))  # type: ignore[arg-type]
    loads: list[int] = []
    go = asyncio.Event()

    async def load() -> None:
        loads.append(len(loads))
        await go.wait()

    writer.load = load  # type: ignore[method-assign]
    ctl = _controller(writer)
    ctl.role.synced = True
    both = asyncio.gather(ctl.worker.full_sync(), ctl.worker.full_sync())
    for _ in range(5):
        await asyncio.sleep(0)
    assert loads == [0]  # the second waits for the first
    go.set()
    await asyncio.wait_for(both, 5)
    assert loads == [0, 1]


async def test_a_later_sync_reads_the_server_once_the_writer_caught_up() -> None:
    writer = Writer(None, TokenBucket(1000, 1000))  # type: ignore[arg-type]
    caught_up, loads = asyncio.Event(), []

    async def drain() -> None:
        await caught_up.wait()

    async def load() -> None:
        loads.append(1)

    writer.drain = drain  # type: ignore[method-assign]
    writer.load = load  # type: ignore[method-assign]
    ctl = _controller(writer)
    ctl.role.synced = True
    sync = asyncio.create_task(ctl.worker.full_sync())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not loads and not ctl.worker.judge_lock.locked()  # batches go on meanwhile
    caught_up.set()
    await asyncio.wait_for(sync, 5)
    assert loads == [1]
