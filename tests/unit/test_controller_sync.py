"""Syncer on its own: what /readyz says, and leadership duties."""

from __future__ import annotations

import asyncio
import gc

from draview.controller.core import Controller, Settings
from draview.controller.ratelimit import TokenBucket
from draview.controller.sync import Syncer, long_lived
from draview.controller.writer import Writer


def _syncer() -> Syncer:
    ctl = Controller(Writer(None, TokenBucket(1, 1)), Settings())  # type: ignore[arg-type]
    return Syncer(ctl, [], None, {})  # type: ignore[arg-type]


def test_readiness_says_what_is_missing() -> None:
    s = _syncer()
    assert s.not_ready() == "initial list not finished"
    s.listed = True
    assert s.not_ready() is None  # a standby with warm caches is ready
    s.ctl.role.leader = True
    assert s.not_ready() == "initial status sync not finished"
    s.ctl.role.synced = True
    assert s.not_ready() is None
    s.ctl.writer.blocked["resourcepoolstatuses"] = "CRD missing"
    assert s.not_ready() == "cannot write status: CRD missing"


def test_readiness_says_why_a_start_up_step_keeps_failing() -> None:
    s = _syncer()
    s._failing("draview CRDs are not served")
    assert s.not_ready() == "initial list not finished: draview CRDs are not served"
    s.listed = True
    assert s.not_ready() == "initial status sync not finished: draview CRDs are not served"
    s._failing(None)
    assert s.not_ready() is None


async def test_losing_the_lease_cancels_the_sync_and_empties_the_queue() -> None:
    s = _syncer()
    s.listed = True

    async def never() -> None:
        await asyncio.Event().wait()

    s.ctl.worker.full_sync = never  # type: ignore[method-assign]
    s.become_leader()
    assert s.ctl.role.leader and s.sync_task is not None
    s.ctl.queue.mark([("d.example.com", "p")])
    await asyncio.sleep(0)
    s.stop_leading()
    await asyncio.gather(s.sync_task, return_exceptions=True)
    assert s.sync_task.cancelled()
    assert not s.ctl.role.leader and not s.ctl.queue.dirty


def test_what_long_lived_work_builds_is_frozen_and_the_collector_back_on() -> None:
    before = gc.get_freeze_count()
    try:
        with long_lived():
            assert not gc.isenabled()  # no collection walks the heap while it grows
            kept = [[i] for i in range(1000)]  # lists: always tracked
        assert gc.isenabled()
        # Out of the generations for good: later collections do not walk them again.
        assert gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()
