"""The operator's own watch: events applied in order from the list's version, lines split
across chunks, bookmarks only move the version, 410 means re-list, a broken connection
resumes from the last version seen."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from draview.controller import watch


class Content:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


class Response:
    def __init__(self, status: int, chunks: list[bytes]) -> None:
        self.status, self.reason, self.content = status, "", Content(chunks)
        self.released = False

    def release(self) -> None:
        self.released = True


class FakeApi:
    """Answers each watch request with the next scripted response (or raises it)."""

    def __init__(self, *answers: Response | BaseException) -> None:
        self.answers = list(answers)
        self.since: list[str] = []

    async def list_cluster_custom_object(self, *args: Any, **kw: Any) -> Response:
        assert kw["watch"] is True and kw["allow_watch_bookmarks"] is True
        self.since.append(kw["resource_version"])
        if not self.answers:
            await asyncio.Event().wait()  # watch forever
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def ev(kind: str, name: str, rv: str, **extra: Any) -> bytes:
    obj = {"metadata": {"name": name, "resourceVersion": rv}, **extra}
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


async def test_events_are_applied_in_order_and_the_last_version_is_returned() -> None:
    body = ev("ADDED", "a", "11") + ev("MODIFIED", "a", "12") + ev("BOOKMARK", "", "15")
    body += ev("DELETED", "b", "13")  # (a bookmark may come before later events)
    half = len(body) // 2 + 3  # a line cut in two between chunks
    api = FakeApi(Response(200, [body[:half], body[half:]]))
    seen: list[tuple[str, str]] = []
    rv = await watch.stream(
        api, "g", "v1", "things", "10", lambda k, o: seen.append((k, o["metadata"]["name"]))
    )
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "b")]
    assert rv == "13" and api.since == ["10"]


async def test_an_expired_version_is_gone_in_either_form() -> None:
    with pytest.raises(watch.Gone):
        await watch.stream(FakeApi(Response(410, [])), "g", "v1", "t", "1", lambda k, o: None)
    expired = json.dumps({"type": "ERROR", "object": {"code": 410}}).encode() + b"\n"
    resp = Response(200, [expired])
    with pytest.raises(watch.Gone):
        await watch.stream(FakeApi(resp), "g", "v1", "t", "1", lambda k, o: None)
    assert resp.released


async def test_follow_resumes_from_the_last_version_and_relists_when_it_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(asyncio, "sleep", _no_sleep)
    api = FakeApi(
        Response(200, [ev("ADDED", "a", "5")]),  # the server ends the watch
        OSError("connection reset"),  # the next one breaks: same version again
        Response(410, []),  # too old: re-list
        Response(200, [ev("ADDED", "c", "30")]),
    )
    relisted: list[str] = []

    async def relist() -> str:
        relisted.append("x")
        return "20"

    seen: list[str] = []
    task = asyncio.create_task(
        watch.follow(
            api, "g", "v1", "t", "1", lambda k, o: seen.append(o["metadata"]["name"]), relist
        )
    )
    for _ in range(1000):  # until the fifth watch request is waiting
        if len(api.since) == 5:
            break
        await asyncio.sleep(0)
    task.cancel()
    assert api.since == ["1", "5", "5", "20", "30"]
    assert relisted == ["x"] and seen == ["a", "c"]


_real_sleep = asyncio.sleep


async def _no_sleep(delay: float) -> None:
    await _real_sleep(0)
