"""When what the writer remembers may not be what the server holds: a write that failed
may have landed (a timeout, a connection lost after sending), or someone wrote since
(409). The writer then reads the object back before taking any difference from it;
otherwise the server's copy could stay wrong until a restart."""

from __future__ import annotations

import copy
import json
from typing import Any

from test_controller_writer import OBJ, _Response

from draview.controller.ratelimit import TokenBucket
from draview.controller.writer import Writer

KEY = ("resourcepoolstatuses", OBJ["metadata"]["name"])


def with_status(**status: Any) -> dict[str, Any]:
    return {**OBJ, "status": status}


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies a merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


class Server:
    """One kind of object as the API server keeps it: versions, 409 on a stale replace,
    merge patches, the status subresource. `lose_answer` makes the next call of that
    method land and then fail as a timeout would."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = 100
        self.lose_answer: set[str] = set()
        self.calls: list[str] = []

    def _stored(self, obj: dict[str, Any]) -> _Response:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.objects[obj["metadata"]["name"]] = obj
        return self._answer(obj)

    def _answer(self, obj: dict[str, Any], status: int = 200) -> _Response:
        return _Response(status, json.dumps(obj).encode())

    def __getattr__(self, method: str) -> Any:
        async def call(*args: Any, **kw: Any) -> _Response:
            self.calls.append(method)
            resp = getattr(self, "_" + method)(*args)
            if method in self.lose_answer:
                self.lose_answer.discard(method)
                raise TimeoutError("no answer (the request landed)")
            return resp  # type: ignore[no-any-return]

        return call

    def _create_cluster_custom_object(self, g: str, v: str, p: str, body: Any) -> _Response:
        name = body["metadata"]["name"]
        if name in self.objects:
            return _Response(409)
        return self._stored({**copy.deepcopy(dict(body)), "status": {}})

    def _get_cluster_custom_object(self, g: str, v: str, p: str, name: str) -> _Response:
        if name not in self.objects:
            return _Response(404)
        return self._answer(self.objects[name])

    def _replace_cluster_custom_object_status(
        self, g: str, v: str, p: str, name: str, body: Any
    ) -> _Response:
        cur = self.objects[name]
        if body["metadata"]["resourceVersion"] != cur["metadata"]["resourceVersion"]:
            return _Response(409)
        return self._stored({**cur, "status": copy.deepcopy(body["status"])})

    def _patch_cluster_custom_object_status(
        self, g: str, v: str, p: str, name: str, body: Any
    ) -> _Response:
        cur = self.objects[name]
        return self._stored({**cur, "status": merge(cur["status"], body["status"])})

    def _patch_cluster_custom_object(
        self, g: str, v: str, p: str, name: str, body: Any
    ) -> _Response:
        cur = self.objects[name]
        return self._stored({**merge(cur, dict(body)), "status": cur["status"]})

    def status(self) -> Any:
        return self.objects[OBJ["metadata"]["name"]]["status"]


def writer_for(server: Server) -> Writer:
    return Writer(server, TokenBucket(1000, 1000))  # type: ignore[arg-type]


A = with_status(devices=[{"name": "gpu-0", "state": "Available"}], summary={"allocated": 0})
B = with_status(devices=[{"name": "gpu-0", "state": "Allocated"}], summary={"allocated": 1})


async def test_a_write_taken_for_failed_that_landed_is_put_right_when_undone() -> None:
    # The claim came and went: the change's write landed unanswered, and the next body
    # is again the one the writer remembers. It must not take the two as equal.
    server = Server()
    writer = writer_for(server)
    await writer.put(A)
    server.lose_answer.add("replace_cluster_custom_object_status")
    assert await writer._write(_job(B)) is not None  # failed, as far as the writer knows
    assert server.status() == B["status"]
    assert await writer.put(A) is True
    assert server.status() == A["status"]
    assert KEY not in writer.uncertain


async def test_the_next_change_after_a_lost_answer_is_taken_from_the_servers_copy() -> None:
    server = Server()
    writer = writer_for(server)
    await writer.put(A)
    server.lose_answer.add("replace_cluster_custom_object_status")
    await writer._write(_job(B))
    # Differs from A in `devices` only: `summary` must still go back to A's.
    c = with_status(devices=[{"name": "gpu-0", "state": "Unavailable"}], summary={"allocated": 0})
    await writer.put(c)
    assert server.status() == c["status"]
    assert writer.known[KEY].value()["status"] == c["status"]
    assert (
        writer.known[KEY].version
        == server.objects[OBJ["metadata"]["name"]]["metadata"]["resourceVersion"]
    )
    # Known again: the next change is one replace at the version just learnt.
    before = len(server.calls)
    await writer.put(B)
    assert server.calls[before:] == ["replace_cluster_custom_object_status"]


async def test_a_stale_version_is_replaced_from_what_the_server_holds_now() -> None:
    # Someone else changed the status since: a merge patch of the difference from what
    # we wrote would keep their `summary`; the status is draview's, all of it.
    server = Server()
    writer = writer_for(server)
    await writer.put(A)
    name = OBJ["metadata"]["name"]
    theirs = server.objects[name]
    server._stored({**theirs, "status": {**theirs["status"], "summary": {"allocated": 7}}})
    await writer.put(B)
    assert server.status() == B["status"]
    assert server.calls[-3:] == [
        "replace_cluster_custom_object_status",  # 409
        "get_cluster_custom_object",
        "replace_cluster_custom_object_status",
    ]


async def test_a_create_that_landed_unanswered_is_written_as_read() -> None:
    server = Server()
    writer = writer_for(server)
    server.lose_answer.add("create_cluster_custom_object")
    assert await writer._write(_job(A)) is not None
    assert KEY not in writer.known and server.status() == {}
    assert await writer.put(A) is True  # read back, status written
    assert server.status() == A["status"]
    assert (
        writer.known[KEY].version
        == server.objects[OBJ["metadata"]["name"]]["metadata"]["resourceVersion"]
    )


async def test_an_object_there_already_is_brought_to_what_was_judged() -> None:
    # A writer that never listed (or whose create landed unanswered before it restarted)
    # finds the object there: the create's 409 is followed by a read and the update.
    server = Server()
    await writer_for(server).put(B)
    writer = writer_for(server)
    assert await writer.put(A) is True
    assert server.calls[-3:] == [
        "create_cluster_custom_object",
        "get_cluster_custom_object",
        "replace_cluster_custom_object_status",
    ]
    assert server.status() == A["status"]


async def test_a_relist_makes_every_copy_the_servers_again() -> None:
    server = Server()
    writer = writer_for(server)
    await writer.put(A)
    writer.uncertain.add(KEY)

    async def pages(*_: Any, **__: Any) -> Any:
        yield [copy.deepcopy(server.objects[OBJ["metadata"]["name"]])]

    import draview.controller.writer as module

    real, module.list_pages = module.list_pages, pages  # type: ignore[assignment]
    try:
        await writer.load()
    finally:
        module.list_pages = real
    assert not writer.uncertain


def _job(body: dict[str, Any]) -> Any:
    from draview.controller.writequeue import Job, Ticket

    return Job(KEY, body, Ticket(None, None))


async def test_a_refused_write_leaves_no_doubt() -> None:
    # A 4xx is the API server refusing the request: nothing landed, nothing to read back.
    server = Server()
    writer = writer_for(server)
    await writer.put(A)

    def refused(*_: Any) -> _Response:
        return _Response(422)

    server._replace_cluster_custom_object_status = refused  # type: ignore[method-assign]
    assert await writer._write(_job(B)) is not None
    assert KEY not in writer.uncertain
