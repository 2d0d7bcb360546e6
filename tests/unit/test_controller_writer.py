"""The writer's requests for a new object: create, then the status replaced at the version
the create returned; a merge patch when that version is unknown, stale or not allowed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from draview.controller import metrics
from draview.controller.known import Known, canonical, left_out_bytes
from draview.controller.kube import Plain
from draview.controller.ratelimit import TokenBucket
from draview.controller.status_requests import FIELD_MANAGER, MERGE, _send
from draview.controller.writer import Writer
from draview.engine.budget import object_bytes

OBJ: dict[str, Any] = {
    "apiVersion": "draview.io/v1alpha1",
    "kind": "ResourcePoolStatus",
    "metadata": {"name": "gpu-pool-1234", "labels": {"draview.io/driver": "gpu"}},
    "spec": {"driver": "gpu", "pool": "pool"},
    "status": {"summary": {"totalDevices": 1}},
}


class _Response:
    """What kubernetes_asyncio hands back with _preload_content=False (an aiohttp response)."""

    def __init__(self, status: int, body: bytes = b"") -> None:
        self.status, self.reason, self.body, self.released = status, "Reason", body, False
        self.read_before_release = False

    async def read(self) -> bytes:
        self.read_before_release = not self.released
        return self.body

    def release(self) -> None:
        self.released = True


class FakeApi:
    """Records each call as (method, body, kwargs) and answers with the next scripted
    status per method (201/200 when the script runs out)."""

    def __init__(self, **script: list[int]) -> None:
        self.script = script
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []
        self.responses: list[_Response] = []

    def __getattr__(self, method: str) -> Any:
        async def call(*args: Any, **kw: Any) -> _Response:
            self.calls.append((method, args[-1], kw))
            queue = self.script.get(method, [])
            status = queue.pop(0) if queue else (201 if method.startswith("create") else 200)
            # Each answer a newer version, the first 42: which one a request carried
            # says which answer it was written after.
            version = str(41 + len(self.calls))
            body = {"metadata": {"name": OBJ["metadata"]["name"], "resourceVersion": version}}
            resp = _Response(status, json.dumps(body).encode())
            self.responses.append(resp)
            return resp

        return call


def writes(verb: str) -> float:
    return metrics.WRITES.labels(verb, "resourcepoolstatuses")._value.get()  # type: ignore[no-any-return]


async def put(api: FakeApi) -> None:
    writer = Writer(api, TokenBucket(1000, 1000))  # type: ignore[arg-type]
    await writer.put(OBJ)
    known = writer.known[("resourcepoolstatuses", OBJ["metadata"]["name"])]
    assert known.value()["status"] == OBJ["status"]
    assert all(r.released for r in api.responses)


async def test_a_new_object_is_created_then_its_status_replaced_at_that_version() -> None:
    before = writes("update")
    api = FakeApi()
    await put(api)
    assert [c[0] for c in api.calls] == [
        "create_cluster_custom_object",
        "replace_cluster_custom_object_status",
    ]
    created, replaced = api.calls[0][1], api.calls[1][1]
    assert "status" not in created  # the status subresource would drop it anyway
    assert replaced == {
        "apiVersion": OBJ["apiVersion"],
        "kind": OBJ["kind"],
        "metadata": {"name": OBJ["metadata"]["name"], "resourceVersion": "42"},
        "status": OBJ["status"],
    }
    assert all(c[2]["field_manager"] == "draview" for c in api.calls)
    # JSON already: the client encodes them without copying them value by value first.
    assert all(type(c[1]) is Plain for c in api.calls)
    assert writes("update") == before + 1


async def test_an_object_over_the_byte_budget_is_written_shortened() -> None:
    # The reconciler hands objects over as judged; the writer fits them to the budget.
    allocs = [{"claimName": f"claim-{i:03d}-" + "c" * 200} for i in range(40)]
    device = {"name": "gpu-0", "allocations": allocs, "allocationCount": len(allocs)}
    big = {**OBJ, "status": {"devices": [device]}}
    api = FakeApi()
    writer = Writer(api, TokenBucket(1000, 1000), max_object_bytes=4000)  # type: ignore[arg-type]
    await writer.put(big)
    (written,) = [c[1]["status"]["devices"][0] for c in api.calls if "status" in c[0]]
    assert written["allocationsTruncated"] is True and written["allocationCount"] == 40
    assert 0 < len(written["allocations"]) < 40
    # What it remembers is what it wrote: the same object again is not written twice.
    await writer.put(big)
    assert len(api.calls) == 2


async def test_an_object_of_other_than_ascii_is_measured_as_it_will_be_sent() -> None:
    # json.dumps sends "é" as six bytes where the remembered UTF-8 text holds two: the
    # twice-the-compact-size bound does not hold, so this object is measured and cut.
    allocs = [{"claimName": f"claim-{i:03d}", "request": "é" * 30} for i in range(40)]
    device = {"name": "gpu-0", "allocations": allocs, "allocationCount": len(allocs)}
    big = {**OBJ, "status": {"devices": [device]}}
    compact = len(canonical(big)) + left_out_bytes(big)
    budget = 2 * compact + 10
    assert object_bytes(big) > budget
    api = FakeApi()
    writer = Writer(api, TokenBucket(1000, 1000), max_object_bytes=budget)  # type: ignore[arg-type]
    await writer.put(big)
    (written,) = [c[1]["status"]["devices"][0] for c in api.calls if "status" in c[0]]
    assert written["allocationsTruncated"] is True and len(written["allocations"]) < 40


async def test_the_servers_key_order_is_not_a_change() -> None:
    # Go sorts map keys; ours keep the order they were built in. Equal values are not
    # written again after a restart, and ours are kept for the next byte comparison.
    ours = {**OBJ, "status": {"summary": {"totalDevices": 1, "allocatedDevices": 0}}}
    key = ("resourcepoolstatuses", OBJ["metadata"]["name"])
    served = json.loads(json.dumps({**ours, "metadata": {**OBJ["metadata"]}}, sort_keys=True))
    api = PagedApi({"resourcepoolstatuses": [served]})
    writer = Writer(api, TokenBucket(1000, 1000))  # type: ignore[arg-type]
    await writer.load()
    assert writer.known[key].data() != canonical(ours)
    fake = FakeApi()
    writer.requests.api = fake  # type: ignore[assignment]
    assert await writer.put(ours) is False
    assert fake.calls == [] and writer.known[key].data() == canonical(ours)


@pytest.mark.parametrize(
    ("script", "why"),
    [
        (
            {"replace_cluster_custom_object_status": [409, 409]},
            "it changed since the create, and again since it was read back",
        ),
        ({"replace_cluster_custom_object_status": [403]}, "RBAC allows patch only"),
    ],
)
async def test_the_status_falls_back_to_a_merge_patch(
    script: dict[str, list[int]], why: str
) -> None:
    api = FakeApi(**script)
    await put(api)
    last = api.calls[-1]
    assert last[0] == "patch_cluster_custom_object_status", why
    assert last[1] == {"status": OBJ["status"]} and last[2]["_content_type"] == MERGE


async def test_other_failures_of_the_status_write_are_not_papered_over() -> None:
    api = FakeApi(replace_cluster_custom_object_status=[422])
    writer = Writer(api, TokenBucket(1000, 1000))  # type: ignore[arg-type]
    with pytest.raises(ApiException) as caught:
        await writer.put(OBJ)
    assert caught.value.status == 422
    assert not writer.known  # not recorded as written: the next batch tries again
    assert "patch_cluster_custom_object_status" not in [c[0] for c in api.calls]


async def test_a_forbidden_status_update_is_not_tried_again() -> None:
    api = FakeApi(replace_cluster_custom_object_status=[403])
    writer = Writer(api, TokenBucket(1000, 1000))  # type: ignore[arg-type]
    await writer.put(OBJ)
    await writer.put({**OBJ, "metadata": {**OBJ["metadata"], "name": "second"}})
    assert [c[0] for c in api.calls] == [
        "create_cluster_custom_object",
        "replace_cluster_custom_object_status",
        "patch_cluster_custom_object_status",
        "create_cluster_custom_object",
        "patch_cluster_custom_object_status",
    ]


def test_send_raises_the_status_of_a_failed_write_and_always_releases() -> None:
    seen: dict[str, object] = {}

    def fake(status: int) -> tuple[Any, _Response]:
        resp = _Response(status, b'{"reason": "AlreadyExists"}')

        async def call(*_: object, **kw: object) -> _Response:
            seen.update(kw)
            return resp

        return call, resp

    call, ok = fake(201)
    assert asyncio.run(_send("create", call)) == b""  # not wanted: not returned
    assert ok.released and seen["field_manager"] == FIELD_MANAGER
    # ...but read to its end all the same: aiohttp closes a connection released with a
    # body unread, and the next request would pay for a new TLS handshake.
    assert ok.read_before_release
    call, conflict = fake(409)
    seen.clear()
    with pytest.raises(ApiException) as caught:
        asyncio.run(_send("delete", call))
    assert caught.value.status == 409 and "AlreadyExists" in str(caught.value.body)
    assert conflict.released and "field_manager" not in seen


class PagedApi:
    """Serves list calls in pages of one object, as the API server does with `limit`."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def list_cluster_custom_object(
        self, group: str, version: str, plural: str, **kw: Any
    ) -> dict[str, Any]:
        assert (group, version) == ("draview.io", "v1alpha1")
        self.calls.append((plural, kw))
        i = int(kw.get("_continue") or 0)
        items = self.objects.get(plural, [])
        more = {"continue": str(i + 1)} if i + 1 < len(items) else {}
        return {"metadata": more, "items": items[i : i + 1]}


async def test_load_reads_our_objects_in_pages_and_keeps_what_put_compares() -> None:
    def server_object(name: str) -> dict[str, Any]:
        meta = {**OBJ["metadata"], "name": name, "managedFields": [{"manager": "draview"}]}
        return {**OBJ, "metadata": {**meta, "resourceVersion": "7", "uid": "u"}}

    api = PagedApi({"resourcepoolstatuses": [server_object("a"), server_object("b")]})
    writer = Writer(api, TokenBucket(1000, 1000))  # type: ignore[arg-type]
    await writer.load()
    assert set(writer.known) == {("resourcepoolstatuses", "a"), ("resourcepoolstatuses", "b")}
    assert writer.known[("resourcepoolstatuses", "a")].value() == {
        "metadata": {"labels": OBJ["metadata"]["labels"], "ownerReferences": []},
        "spec": OBJ["spec"],
        "status": OBJ["status"],
    }
    pools = [kw for plural, kw in api.calls if plural == "resourcepoolstatuses"]
    assert [kw.get("_continue") for kw in pools] == [None, "1"]
    assert all(kw["limit"] == 500 for kw in pools)


async def test_load_keeps_one_copy_of_what_did_not_change() -> None:
    changed = {**OBJ, "metadata": {**OBJ["metadata"], "name": "changed"}}
    writer = Writer(FakeApi(), TokenBucket(1000, 1000))  # type: ignore[arg-type]
    await writer.put(OBJ)
    await writer.put(changed)
    ours = dict(writer.known)
    # The server holds OBJ as written (plus its own metadata); "changed" was edited.
    on_server = [
        {**OBJ, "metadata": {**OBJ["metadata"], "uid": "u", "resourceVersion": "9"}},
        {**changed, "status": {"summary": {"totalDevices": 0}}},
    ]
    writer.requests.api = PagedApi({"resourcepoolstatuses": on_server})  # type: ignore[assignment]
    await writer.load()
    same, edited = ("resourcepoolstatuses", "gpu-pool-1234"), ("resourcepoolstatuses", "changed")
    assert writer.known[same] is ours[same]
    assert writer.known[edited].value()["status"] == {"summary": {"totalDevices": 0}}


async def test_changes_to_known_objects_go_before_creations() -> None:
    api = FakeApi()
    writer = Writer(api, TokenBucket(1000, 1000), concurrency=1)  # type: ignore[arg-type]
    names = ["new-a", "old-b", "new-c", "old-d"]
    objs = [{**OBJ, "metadata": {**OBJ["metadata"], "name": n}} for n in names]
    for o in objs:
        if o["metadata"]["name"].startswith("old"):
            writer.known[("resourcepoolstatuses", o["metadata"]["name"])] = Known.of(
                {**o, "status": {"summary": {"totalDevices": 0}}}
            )
    await writer.apply(objs, [])
    first = [m for m, _, _ in api.calls]
    # Both status patches of the known objects, then each creation and its status.
    assert first[:2] == ["patch_cluster_custom_object_status"] * 2, first
    assert first[2] == "create_cluster_custom_object", first
