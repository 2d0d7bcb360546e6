"""until_done: a start-up step is retried until it succeeds, and what failed attempts
leave behind does not outlive them while the collector is off (sync.long_lived)."""

from __future__ import annotations

import gc
import weakref

import pytest

from draview.controller.startup import until_done
from draview.controller.sync import long_lived


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


async def test_a_failed_attempts_cycles_are_collected_while_the_collector_is_off() -> None:
    left: list[weakref.ref[_Node]] = []
    attempts = 0

    async def step() -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            a, b = _Node(), _Node()
            a.other, b.other = b, a  # only the cyclic collector frees these
            left.append(weakref.ref(a))
            raise OSError("connection refused")

    frozen = gc.get_freeze_count()
    try:
        with long_lived():
            await until_done("initial list", step)
            assert not gc.isenabled()
            assert attempts == 2
            assert left[0]() is None  # freed before the retry, not frozen at the end
    finally:
        if gc.get_freeze_count() > frozen:
            gc.unfreeze()


async def test_an_unexpected_error_is_not_retried() -> None:
    async def step() -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        await until_done("initial list", step)


async def test_readiness_hears_why_an_attempt_failed_and_that_it_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from kubernetes_asyncio.client.exceptions import ApiException

    from draview.controller import startup

    async def no_wait(_: float) -> None:
        return None

    monkeypatch.setattr(asyncio, "sleep", no_wait)
    heard: list[str | None] = []
    failures = [ApiException(status=404, reason="Not Found"), OSError("connection refused")]

    async def step() -> None:
        if failures:
            raise failures.pop(0)

    await until_done("initial status sync", step, heard.append)
    assert heard == [
        startup.NO_CRDS,
        "the API server is unreachable: connection refused",
        None,
    ]
