"""How `draview run` stops: signals, a task that ends on its own, and the shutdown order
(written once, here)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Any

from draview.controller import metrics
from draview.controller.core import Controller
from draview.controller.leader import LeaderElector

log = logging.getLogger("draview")


def chain_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """kopf installs its own SIGTERM/SIGINT handlers when it starts, replacing ours. Chain
    them instead, so that a signal always sets our stop flag too: kopf stopping with the
    flag unset is then certainly kopf failing, not a signal."""
    install = loop.add_signal_handler

    def add(sig: int, callback: Callable[..., object], *args: Any) -> None:
        if sig not in (signal.SIGTERM, signal.SIGINT):
            return install(sig, callback, *args)

        def both(*a: Any) -> None:
            stop.set()
            callback(*a)

        return install(sig, both, *args)

    setattr(loop, "add_signal_handler", add)  # noqa: B010 (a method of this loop only)


async def wait_for_stop(stop: asyncio.Event, tasks: list[asyncio.Task[Any]]) -> int:
    """Wait for a signal (0) or for any task to end, which none should (1: one clear
    line saying which and why)."""
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    for t in tasks:
        if not t.done():
            continue
        if t.get_name() == "kopf" and stop.is_set() and t.exception() is None:
            continue  # kopf stops by itself once the stop flag is set
        exc = None if t.cancelled() else t.exception()
        metrics.TASK_FAILURES.labels(t.get_name()).inc()
        log.critical(
            "fatal: internal task ended, exiting",
            extra={"task": t.get_name(), "error": repr(exc) if exc else "returned"},
        )
        stop.set()
        return 1
    return 0


async def shutdown(
    ctl: Controller,
    elector: LeaderElector | None,
    tasks: list[asyncio.Task[Any]],
    deadline: float,
) -> None:
    """The shutdown order: stop new work (pools taken for a batch but not judged go back
    to the queue); judge them and wait for every write handed over, within `deadline`
    seconds, the elector still renewing (without it the fence would close at the renew
    deadline and cut the flush short); past it, cancel the writes left (their pools go back
    on the queue, for the next leader); then hand the Lease over, and give kopf a few
    seconds to end."""
    keep = ("kopf", "leader")
    running = [t for t in tasks if not t.done() and t.get_name() not in keep]
    for t in running:
        t.cancel()
    await asyncio.gather(*running, return_exceptions=True)
    queue = ctl.queue
    try:
        async with asyncio.timeout(deadline):
            while ctl.role.leader and await ctl.worker.flush_due():
                pass
    except TimeoutError:
        ctl.worker.interrupt()
        log.warning(
            "shutdown deadline passed; the next leader writes the rest",
            extra={"pools": len(queue.dirty)},
        )
    for t in tasks:
        if t.get_name() == "leader":
            t.cancel()
            await asyncio.gather(t, return_exceptions=True)
    if elector is not None:
        await elector.release()
    kopf_task = next(t for t in tasks if t.get_name() == "kopf")
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.wait_for(kopf_task, 5)  # all of it within the pod's grace period
