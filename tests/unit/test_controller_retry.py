"""The one retry policy, with a fake clock: classification, capped exponential backoff
with jitter, Retry-After, parking, and what the writer does with it per object."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException
from test_controller_writer import OBJ, FakeApi

from draview.controller import metrics
from draview.controller.ratelimit import TokenBucket
from draview.controller.retry import Backoffs, Failure, RetryPolicy, classify
from draview.controller.writer import MAX_PAUSE, Writer


def api_error(status: int, retry_after: str | None = None) -> ApiException:
    exc = ApiException(status=status, reason="R")
    exc.headers = {"Retry-After": retry_after} if retry_after else {}
    return exc


@pytest.mark.parametrize("status", [409, 429, 500, 502, 503, 504])
def test_server_trouble_and_conflicts_are_transient(status: int) -> None:
    assert not classify(api_error(status)).permanent


@pytest.mark.parametrize("status", [400, 403, 404, 413, 422])
def test_requests_that_would_fail_again_are_permanent(status: int) -> None:
    f = classify(api_error(status))
    assert f.permanent and f.code == str(status)


def test_timeouts_and_lost_connections_are_transient() -> None:
    assert classify(TimeoutError()) == Failure("timeout", False, "request timed out")
    assert classify(aiohttp.ServerDisconnectedError()).code == "connection"
    assert classify(ConnectionResetError()).code == "connection"
    assert classify(ApiException(status=0)).code == "connection"


def test_retry_after_is_read() -> None:
    assert classify(api_error(429, "7")).retry_after == 7.0
    assert classify(api_error(429, "Wed, 21 Oct 2015 07:28:00 GMT")).retry_after is None


def test_backoff_doubles_up_to_the_cap_with_bounded_jitter() -> None:
    policy = RetryPolicy(base=0.5, cap=60, parked=300, jitter=0.5)
    t = Failure("503", False, "")
    lows = [policy.delay(n, t, 0.0) for n in range(1, 12)]
    highs = [policy.delay(n, t, 0.999999) for n in range(1, 12)]
    assert lows[:4] == [0.25, 0.5, 1.0, 2.0]
    assert max(highs) == pytest.approx(60, rel=1e-5) and max(lows) == 30
    assert all(lo < hi for lo, hi in zip(lows, highs, strict=True))


def test_retry_after_is_honoured_and_permanent_failures_are_parked() -> None:
    policy = RetryPolicy()
    assert policy.delay(1, Failure("429", False, "", retry_after=12), 0.0) == 12
    assert policy.delay(1, Failure("429", False, "", retry_after=9999), 0.0) == policy.parked
    assert policy.delay(1, Failure("422", True, ""), 0.0) == policy.parked / 2
    assert policy.delay(1, Failure("422", True, ""), 0.999) > policy.parked * 0.99


def test_backoffs_per_key_with_a_fake_clock() -> None:
    now = [100.0]
    b: Backoffs[str] = Backoffs(RetryPolicy(jitter=0), clock=lambda: now[0], rand=lambda: 0.5)
    t = Failure("503", False, "busy")
    assert b.failed("a", t) == (100.5, True)
    assert b.failed("a", t) == (101.0, False)  # same reason: not logged again
    assert b.failed("a", Failure("504", False, "gw")) == (102.0, True)
    assert b.not_before("a") == 102.0 and b.not_before("other") is None
    now[0] = 102.0
    assert b.not_before("a") is None
    b.succeeded("a")
    assert b.failed("a", t) == (102.5, True)  # a success starts over


def errors(kind: str, code: str) -> float:
    return metrics.UPDATE_ERRORS.labels(kind, code)._value.get()  # type: ignore[no-any-return]


def named(name: str) -> dict[str, Any]:
    return {**OBJ, "metadata": {**OBJ["metadata"], "name": name}}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def writer_with(api: FakeApi, clock: Clock) -> Writer:
    backoffs: Backoffs[tuple[str, str]] = Backoffs(RetryPolicy(), clock=clock, rand=lambda: 0.0)
    return Writer(api, TokenBucket(1000, 1000), backoffs=backoffs)  # type: ignore[arg-type]


async def test_a_permanent_failure_is_parked_counted_by_code_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, clock = FakeApi(create_cluster_custom_object=[422]), Clock()
    w = writer_with(api, clock)
    before = errors("resourcepoolstatuses", "422")
    failed = await w.apply([named("bad"), named("good")], [])
    assert list(failed) == [("resourcepoolstatuses", "bad")]
    assert failed[("resourcepoolstatuses", "bad")] == RetryPolicy().parked / 2
    assert ("resourcepoolstatuses", "good") in w.known  # the other object was not held up
    assert errors("resourcepoolstatuses", "422") == before + 1
    calls = len(api.calls)
    for _ in range(5):  # batches during the parking: no request for it
        await w.apply([named("bad")], [])
    assert len(api.calls) == calls
    clock.now = 1000
    api.script["create_cluster_custom_object"] = [422]
    await w.apply([named("bad")], [])  # due again: one try, still 422, no new log line
    assert len(api.calls) == calls + 1
    parked = [r for r in caplog.records if "parked" in r.getMessage()]
    assert len(parked) == 1 and getattr(parked[0], "code", None) == "422"


async def test_a_transient_failure_backs_off_briefly_and_honours_retry_after() -> None:
    api, clock = FakeApi(create_cluster_custom_object=[503]), Clock()
    w = writer_with(api, clock)
    failed = await w.apply([named("x")], [])
    assert failed[("resourcepoolstatuses", "x")] == pytest.approx(0.25)
    clock.now = 0.3
    assert await w.apply([named("x")], []) == {}
    exc = api_error(429, "20")
    assert w._failed(("resourcepoolstatuses", "y"), exc) == pytest.approx(20.3)


async def test_every_failure_is_logged_with_the_retry_after_next_to_the_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="draview.writer")
    w = writer_with(FakeApi(), Clock())
    for _ in range(3):
        w._failed(("resourcepoolstatuses", "y"), api_error(429, "7"))
    lines = [r for r in caplog.records if "status write failed" in r.getMessage()]
    assert [r.levelno for r in lines] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    for r in lines:
        assert getattr(r, "retry_after", None) == 7.0
        assert getattr(r, "retry_in", 0) >= 7.0


async def test_an_unreachable_api_server_is_one_line_per_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="draview.writer")
    api, clock = FakeApi(), Clock()
    w = writer_with(api, clock)
    for name in ("a", "b", "c"):
        w._failed(("resourcepoolstatuses", name), ApiException(status=0))
    assert await w.apply([named("d")], []) == {}  # a write gets through: the outage is over
    w._failed(("resourcepoolstatuses", "e"), ApiException(status=0))
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert said == [
        "API server unreachable; status writes wait for it",
        "API server reachable again; status writes resume",
        "API server unreachable; status writes wait for it",
    ]
    assert errors("resourcepoolstatuses", "connection") >= 4  # every failure still counted


async def test_a_missing_crd_blocks_its_kind_until_a_probe_sees_it_again() -> None:
    api, clock = FakeApi(create_cluster_custom_object=[404]), Clock()
    w = writer_with(api, clock)
    await w.apply([named("a"), named("b")], [])
    assert "resourcepoolstatuses" in w.blocked
    creates = [c for c in api.calls if c[0] == "create_cluster_custom_object"]
    assert len(creates) <= 2
    calls = len(api.calls)
    await w.apply([named("c")], [])
    assert len(api.calls) == calls  # nothing is sent while the kind is not served
    assert await w.probe()  # the fake answers the list: served again
    assert not w.blocked and not w.backoffs.state
    assert await w.apply([named("c")], []) == {}


async def test_no_request_starts_once_the_fence_is_closed() -> None:
    api = FakeApi()
    leading = [True]
    w = Writer(api, TokenBucket(1000, 1000), may_write=lambda: leading[0])  # type: ignore[arg-type]
    await w.apply([named("a")], [])
    sent = len(api.calls)
    leading[0] = False
    failed = await w.apply([named("b"), named("c")], [])
    assert len(api.calls) == sent and set(failed) == {
        ("resourcepoolstatuses", "b"),
        ("resourcepoolstatuses", "c"),
    }


async def test_losing_leadership_cancels_writes_in_flight_and_drops_those_waiting() -> None:
    """A slow API: step_down cancels the request in flight; the object queued behind it
    is never sent."""
    from draview.controller.core import Controller, Settings

    started = asyncio.Event()
    cancelled: list[str] = []

    class SlowApi(FakeApi):
        def __getattr__(self, method: str) -> Any:
            async def call(*args: Any, **kw: Any) -> Any:
                started.set()
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    cancelled.append(method)
                    raise

            return call

    writer = Writer(SlowApi(), TokenBucket(1000, 1000), concurrency=1)  # type: ignore[arg-type]
    ctl = Controller(writer, Settings())
    ctl.leader = True
    ticket = ctl.worker._hand_over(([named("a"), named("b")], []))
    await started.wait()
    ctl.worker.step_down()
    await asyncio.wait_for(ticket.wait(), 1)
    await asyncio.sleep(0)
    assert cancelled == ["create_cluster_custom_object"]  # a's create; b never started
    assert set(ticket.failed) == {("resourcepoolstatuses", "a"), ("resourcepoolstatuses", "b")}
    assert not writer.queue and not ctl.queue.dirty  # the new leader redoes them


async def test_forbidden_writes_block_readiness_until_one_succeeds() -> None:
    api, clock = FakeApi(create_cluster_custom_object=[403]), Clock()
    w = writer_with(api, clock)
    await w.apply([named("a")], [])
    assert w.blocked == {
        "create resourcepoolstatuses": "RBAC forbids create on resourcepoolstatuses.draview.io"
    }
    await w.apply([named("b")], [])  # RBAC fixed: the next create succeeds
    assert not w.blocked


async def test_a_forbidden_status_update_with_a_patch_fallback_blocks_nothing() -> None:
    w = writer_with(FakeApi(replace_cluster_custom_object_status=[403]), Clock())
    assert await w.apply([named("a")], []) == {}
    assert not w.blocked


async def test_a_429_with_retry_after_pauses_every_write_not_just_its_object() -> None:
    now = [100.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(qps=50, burst=5, clock=lambda: now[0], sleep=sleep)
    w = Writer(FakeApi(), bucket)  # type: ignore[arg-type]
    w._failed(("resourcepoolstatuses", "x"), api_error(429, "3"))
    await bucket.take()  # a token for another object: only after the pause
    assert now[0] >= 103.0 and slept[0] == pytest.approx(3.0)
    w._failed(("resourcepoolstatuses", "x"), api_error(429, "600"))  # capped
    assert bucket.paused_until == pytest.approx(now[0] + MAX_PAUSE)
    w._failed(("resourcepoolstatuses", "x"), api_error(503))  # other failures: no pause
    assert bucket.paused_until == pytest.approx(now[0] + MAX_PAUSE)
