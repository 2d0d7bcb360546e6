"""A periodic re-list runs while the watch goes on: its pages are the snapshot of its
start, older than what the watch applies meanwhile."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from draview.controller import informers
from draview.controller.informers import Informer


def claim(uid: str, allocated: bool, version: int) -> dict[str, Any]:
    meta = {"uid": uid, "name": uid, "namespace": "ns", "resourceVersion": str(version)}
    return {"metadata": meta, "status": {"allocated": allocated}}


class Store:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def __call__(self, event: str, obj: dict[str, Any]) -> None:
        uid = obj["metadata"]["uid"]
        if event == "DELETED":
            self.objects.pop(uid, None)
        else:
            self.objects[uid] = obj


async def relist(
    monkeypatch: pytest.MonkeyPatch,
    store: Store,
    pages: list[list[dict[str, Any]]],
    between: Callable[[Informer], None],
) -> Informer:
    """Re-list `pages` (the snapshot at version 100) into `store`, calling `between`
    before every page but the first: the watch events that arrive while the list runs."""
    inf = Informer(
        "claim", "resourceclaims", None, "resource.k8s.io", "v1", store, lambda: set(store.objects)
    )

    async def list_pages(*_: Any, listed: dict[str, str], **__: Any) -> AsyncIterator[Any]:
        listed["resourceVersion"] = "100"
        for i, page in enumerate(pages):
            if i:
                between(inf)
            yield page

    monkeypatch.setattr(informers.kube, "list_pages", list_pages)
    await inf.relist()
    return inf


async def test_what_the_watch_changed_during_a_relist_is_not_undone_by_a_later_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = Store()
    for uid in ("a", "b", "c"):
        store("ADDED", claim(uid, True, 10))

    def watch(inf: Informer) -> None:
        inf.on_event("MODIFIED", claim("b", False, 101))  # released after the snapshot
        inf.on_event("DELETED", claim("c", True, 102))  # deleted after the snapshot
        inf.on_event("ADDED", claim("d", True, 103))  # new after the snapshot

    # The snapshot (version 100) still has b allocated and c present, in the second page.
    pages = [[claim("a", True, 10)], [claim("b", True, 10), claim("c", True, 10)]]
    await relist(monkeypatch, store, pages, watch)
    assert store.objects["b"]["status"]["allocated"] is False
    assert "c" not in store.objects  # not brought back by the older page
    assert "d" in store.objects  # not pruned: the list started before it was made
    assert store.objects["a"]["metadata"]["resourceVersion"] == "10"


async def test_a_relist_still_heals_what_the_watch_missed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = Store()
    store("ADDED", claim("a", True, 10))
    store("ADDED", claim("gone", True, 10))
    pages = [[claim("a", False, 50)], [claim("new", True, 60)]]
    inf = await relist(monkeypatch, store, pages, lambda _: None)
    assert store.objects["a"]["status"]["allocated"] is False
    assert set(store.objects) == {"a", "new"}
    assert inf.watched is None  # events after the re-list are not noted any more
