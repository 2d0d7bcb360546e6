"""Leader election with a fake clock and a fake Lease API (compare-and-swap like the
API server): renewal during long work, transient failures, the renew deadline and
fencing, and takeover only after a full unchanged lease duration."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import logging

import pytest
from kubernetes_asyncio.client import V1Lease
from kubernetes_asyncio.client.exceptions import ApiException

from draview.controller.leader import LeaderElector


class FakeLeases:
    def __init__(self) -> None:
        self.lease: V1Lease | None = None
        self.version = 0
        self.fail = 0  # the next N requests fail with a 500
        self.writes: list[str] = []

    def _maybe_fail(self) -> None:
        if self.fail:
            self.fail -= 1
            raise ApiException(status=500, reason="etcd timeout")

    async def read_namespaced_lease(self, name: str, namespace: str) -> V1Lease:
        self._maybe_fail()
        if self.lease is None:
            raise ApiException(status=404, reason="NotFound")
        return copy.deepcopy(self.lease)

    async def create_namespaced_lease(self, namespace: str, body: V1Lease) -> V1Lease:
        self._maybe_fail()
        if self.lease is not None:
            raise ApiException(status=409, reason="AlreadyExists")
        return self._store(body)

    async def replace_namespaced_lease(self, name: str, namespace: str, body: V1Lease) -> V1Lease:
        self._maybe_fail()
        assert self.lease is not None
        if body.metadata.resource_version != self.lease.metadata.resource_version:
            raise ApiException(status=409, reason="Conflict")
        return self._store(body)

    def _store(self, body: V1Lease) -> V1Lease:
        self.version += 1
        body = copy.deepcopy(body)
        body.metadata.resource_version = str(self.version)
        self.lease = body
        self.writes.append(body.spec.holder_identity)
        return body


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def elector(
    api: FakeLeases,
    clock: Clock,
    identity: str,
    skew_hours: float = 0,
    log: list[str] | None = None,
) -> LeaderElector:
    events = log if log is not None else []
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(hours=skew_hours)
    return LeaderElector(
        api,
        "ns",
        "lease",
        identity,
        on_start=lambda: events.append(f"{identity} start"),
        on_stop=lambda: events.append(f"{identity} stop"),
        lease_seconds=15,
        renew_deadline=10,
        retry_period=2,
        clock=clock,
        sleep=clock.sleep,
        wall=lambda: base + dt.timedelta(seconds=clock.now),
    )


async def test_renewal_goes_on_while_the_first_sync_runs() -> None:
    """on_start only starts work: the loop keeps renewing during a sync that lasts many
    lease durations, and writes stay allowed throughout."""
    api, clock = FakeLeases(), Clock()
    done = asyncio.Event()
    work: list[asyncio.Task[None]] = []
    a = elector(api, clock, "a")
    a.on_start = lambda: work.append(asyncio.create_task(done.wait()))
    loop = asyncio.create_task(a.run())
    allowed = []
    while clock.now < 100:  # the "sync" is still running: nobody set `done`
        await asyncio.sleep(0)
        allowed.append(a.may_write())
    loop.cancel()
    assert work and not work[0].done()
    assert all(allowed[5:]) and a.leading
    assert len(api.writes) >= 100 / 2 - 2  # one renewal per retry period
    work[0].cancel()


async def test_transient_failures_are_tolerated_until_the_renew_deadline() -> None:
    api, clock = FakeLeases(), Clock()
    events: list[str] = []
    a = elector(api, clock, "a", log=events)
    await a.step()
    assert a.leading and a.may_write()
    api.fail = 4  # 4 rounds, 8 s: under the 10 s deadline
    for _ in range(4):
        await clock.sleep(2)
        await a.step()
        assert a.leading
    await clock.sleep(2)
    await a.step()  # renewed again
    assert a.leading and a.renewed_at == clock.now
    api.fail = 100
    stepped_down_at = None
    for _ in range(10):
        await clock.sleep(2)
        await a.step()
        if not a.leading and stepped_down_at is None:
            stepped_down_at = clock.now
    assert stepped_down_at == a.renewed_at + 10
    assert events == ["a start", "a stop"]


async def test_failing_lease_requests_are_one_warning_per_streak(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="draview.leader")
    api, clock = FakeLeases(), Clock()
    a = elector(api, clock, "a")
    await a.step()
    api.fail = 3
    for _ in range(5):
        await clock.sleep(2)
        await a.step()
    said = [r.getMessage() for r in caplog.records if r.name == "draview.leader"]
    assert said == ["became leader", "lease request failed", "lease requests succeed again"]


async def test_no_write_starts_after_the_renew_deadline_even_if_the_loop_is_stuck() -> None:
    api, clock = FakeLeases(), Clock()
    a = elector(api, clock, "a")
    await a.step()
    clock.now += 9.9
    assert a.may_write()
    clock.now += 0.1  # no step ran: a hung renewal must not extend the right to write
    assert a.leading and not a.may_write()


@pytest.mark.parametrize("skew_hours", [-1.0, 0.0, 1.0])
async def test_takeover_only_after_a_full_unchanged_lease_duration(skew_hours: float) -> None:
    """b judges expiry on its own clock from when it saw the record change: a's
    renewTime, written by a clock an hour off, plays no part."""
    api, clock = FakeLeases(), Clock()
    a = elector(api, clock, "a", skew_hours=skew_hours)
    b = elector(api, clock, "b")
    await a.step()
    for _ in range(5):  # a renews, b watches
        await clock.sleep(2)
        await a.step()
        await b.step()
        assert not b.leading
    last_change = clock.now  # a stops (SIGSTOP): the record no longer changes
    while not b.leading:
        await clock.sleep(1)
        await b.step()
    assert clock.now - last_change >= 15
    assert clock.now - last_change <= 15 + 1
    assert api.lease is not None and api.lease.spec.holder_identity == "b"
    # a wakes up: it may not write (deadline long passed), and its renewal fails.
    assert not a.may_write()
    await a.step()
    assert not a.leading


async def test_a_replica_that_sees_another_holder_steps_down_at_once() -> None:
    api, clock = FakeLeases(), Clock()
    events: list[str] = []
    a = elector(api, clock, "a", log=events)
    await a.step()
    assert api.lease is not None
    api.lease.spec.holder_identity = "intruder"
    api.version += 1
    api.lease.metadata.resource_version = str(api.version)
    await clock.sleep(2)
    await a.step()
    assert not a.leading and events == ["a start", "a stop"]


async def test_released_lease_is_taken_over_at_once() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    await a.step()
    await b.step()
    await a.release()
    assert not a.may_write()
    await clock.sleep(2)
    await b.step()
    assert b.leading


def test_timings_must_nest() -> None:
    with pytest.raises(ValueError):
        LeaderElector(
            FakeLeases(), "ns", "l", "a", lambda: None, lambda: None, 15, renew_deadline=15
        )
