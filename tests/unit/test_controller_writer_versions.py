"""A change to an object the writer knows: its status replaced at the resourceVersion the
server last gave (cheaper for the API server than applying a merge patch); when that
version is stale, replaced at the one read back; the merge patch of the difference
when the version is unknown or RBAC allows only patch."""

from __future__ import annotations

import json
from typing import Any

from test_controller_writer import OBJ, FakeApi, PagedApi

from draview.controller.ratelimit import TokenBucket
from draview.controller.status_requests import resource_version as _resource_version
from draview.controller.writer import Writer

KEY = ("resourcepoolstatuses", OBJ["metadata"]["name"])
CHANGED = {**OBJ, "status": {"summary": {"totalDevices": 2}}}


def writer_for(api: Any) -> Writer:
    return Writer(api, TokenBucket(1000, 1000))


async def test_a_change_replaces_the_status_at_the_version_last_written() -> None:
    api = FakeApi()
    writer = writer_for(api)
    await writer.put(OBJ)  # create (answered 42), status replaced (answered 43)
    assert writer.known[KEY].version == "43"
    await writer.put(CHANGED)
    method, body, _ = api.calls[-1]
    assert method == "replace_cluster_custom_object_status"
    assert body["metadata"] == {"name": OBJ["metadata"]["name"], "resourceVersion": "43"}
    assert body["status"] == CHANGED["status"]  # the whole status, not a difference
    assert writer.known[KEY].version == "44"


async def test_a_stale_version_is_read_again_and_replaced_at_the_new_one() -> None:
    # Someone else wrote the object since: the replace is refused with 409. What we
    # remember is then not what the server holds, so no difference is taken from it.
    api = FakeApi(replace_cluster_custom_object_status=[200, 409])
    writer = writer_for(api)
    await writer.put(OBJ)
    await writer.put(CHANGED)
    assert [c[0] for c in api.calls[2:]] == [
        "replace_cluster_custom_object_status",
        "get_cluster_custom_object",
        "replace_cluster_custom_object_status",
    ]
    _, body, _ = api.calls[-1]
    assert body["metadata"]["resourceVersion"] == "45"  # the read's answer
    assert body["status"] == CHANGED["status"]
    assert writer.known[KEY].version == "46"
    assert writer.known[KEY].value()["status"] == CHANGED["status"]


async def test_the_versions_listed_at_load_are_the_ones_replaced_at() -> None:
    served = {**OBJ, "metadata": {**OBJ["metadata"], "resourceVersion": "7", "uid": "u"}}
    writer = writer_for(PagedApi({"resourcepoolstatuses": [served]}))
    await writer.load()
    assert writer.known[KEY].version == "7"
    api = FakeApi()
    writer.requests.api = api  # type: ignore[assignment]
    await writer.put(CHANGED)
    ((method, body, _),) = api.calls
    assert method == "replace_cluster_custom_object_status"
    assert body["metadata"]["resourceVersion"] == "7"


async def test_a_relist_refreshes_the_version_of_an_unchanged_object() -> None:
    # Another writer touched only what we do not compare (an annotation): same status,
    # newer version. Without the new version every next change would cost a 409 first.
    api = FakeApi()
    writer = writer_for(api)
    await writer.put(OBJ)
    kept = writer.known[KEY]
    served = {**OBJ, "metadata": {**OBJ["metadata"], "resourceVersion": "99"}}
    writer.requests.api = PagedApi({"resourcepoolstatuses": [served]})  # type: ignore[assignment]
    await writer.load()
    assert writer.known[KEY] is kept and kept.version == "99"


async def test_without_rbac_for_update_changes_are_merge_patches() -> None:
    api = FakeApi(replace_cluster_custom_object_status=[403])
    writer = writer_for(api)
    await writer.put(OBJ)  # the create's status: 403, then a merge patch
    await writer.put(CHANGED)
    assert [c[0] for c in api.calls] == [
        "create_cluster_custom_object",
        "replace_cluster_custom_object_status",
        "patch_cluster_custom_object_status",
        "patch_cluster_custom_object_status",
    ]


def test_the_version_is_the_metadatas_however_the_object_is_spelled() -> None:
    # As Go encodes it: keys sorted, so annotations and managedFields come first; a
    # quote inside a string is escaped and cannot end the key.
    obj = {
        "apiVersion": "draview.io/v1alpha1",
        "kind": "ResourcePoolStatus",
        "metadata": {
            "annotations": {"note": 'copied: "resourceVersion":"1"'},
            "managedFields": [{"fieldsV1": {"f:status": {}}, "manager": "draview"}],
            "name": "p",
            "resourceVersion": "123456",
        },
        "status": {"devices": [{"name": '"resourceVersion":"2"'}]},
    }
    for text in (json.dumps(obj, sort_keys=True, separators=(",", ":")), json.dumps(obj, indent=2)):
        assert _resource_version(text.encode()) == "123456"
    assert _resource_version(b'{"kind":"Status","code":409}') is None
