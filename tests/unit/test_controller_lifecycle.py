"""How `draview run` ends: a signal is exit 0; any internal task or kopf ending on its
own is exit 1 with one critical line naming it."""

from __future__ import annotations

import asyncio
import signal

import pytest

from draview.controller.lifecycle import chain_signals as _chain_signals
from draview.controller.lifecycle import wait_for_stop as _wait_for_stop


async def forever() -> None:
    await asyncio.Event().wait()


async def test_a_signal_is_a_clean_stop() -> None:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(forever(), name="batches")]
    asyncio.get_running_loop().call_later(0.01, stop.set)
    assert await _wait_for_stop(stop, tasks) == 0
    tasks[0].cancel()


async def test_kopf_stopping_after_the_stop_flag_is_clean() -> None:
    stop = asyncio.Event()

    async def kopf() -> None:
        await stop.wait()

    tasks = [asyncio.create_task(kopf(), name="kopf")]
    asyncio.get_running_loop().call_later(0.01, stop.set)
    assert await _wait_for_stop(stop, tasks) == 0


@pytest.mark.parametrize("name", ["kopf", "batches", "leader"])
async def test_a_task_that_fails_ends_the_process_with_one_clear_line(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def fails() -> None:
        raise RuntimeError("watch stream: 410 Gone, fatal")

    stop = asyncio.Event()
    other = asyncio.create_task(forever(), name="explanations")
    tasks = [other, asyncio.create_task(fails(), name=name)]
    assert await _wait_for_stop(stop, tasks) == 1
    assert stop.is_set()  # kopf and the rest are told to stop
    fatal = [r for r in caplog.records if r.levelname == "CRITICAL"]
    assert len(fatal) == 1 and getattr(fatal[0], "task", None) == name
    assert "410 Gone" in getattr(fatal[0], "error", "")
    other.cancel()


async def test_kopf_returning_without_a_stop_is_fatal() -> None:
    async def kopf() -> None:
        return None

    stop = asyncio.Event()
    assert await _wait_for_stop(stop, [asyncio.create_task(kopf(), name="kopf")]) == 1


def test_kopfs_signal_handlers_also_set_our_stop_flag() -> None:
    """kopf replaces our SIGTERM handler when it starts; chained, a signal still sets the
    stop flag, so kopf stopping on a signal is never taken for a failure."""
    installed: dict[int, tuple[object, tuple[object, ...]]] = {}

    class Loop:
        def add_signal_handler(self, sig: int, callback: object, *args: object) -> None:
            installed[sig] = (callback, args)

    stop = asyncio.Event()
    loop = Loop()
    _chain_signals(loop, stop)  # type: ignore[arg-type]
    seen: list[object] = []
    loop.add_signal_handler(signal.SIGTERM, seen.append, "kopf's flag")
    loop.add_signal_handler(signal.SIGHUP, seen.append, "other")
    callback, args = installed[signal.SIGTERM]
    callback(*args)  # type: ignore[operator]
    assert stop.is_set() and seen == ["kopf's flag"]
    assert installed[signal.SIGHUP] == (seen.append, ("other",))
