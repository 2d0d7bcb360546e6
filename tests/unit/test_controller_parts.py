"""Pure parts of the controller: merge patches, the store, re-lists, the token bucket."""

from __future__ import annotations

import asyncio

from builders import DRIVER, claim, device, result, rslice, taint_rule

from draview.api.claims import ResourceClaim
from draview.api.slices import ResourceSlice
from draview.api.taints import DeviceTaintRule
from draview.controller.core import Controller, Settings
from draview.controller.informers import Informer
from draview.controller.ingest import INTERNER_MIN
from draview.controller.mergepatch import merge_diff
from draview.controller.ratelimit import TokenBucket
from draview.controller.store import Store
from draview.controller.writer import Writer


def test_merge_diff_is_minimal_and_nulls_removed_keys() -> None:
    old = {"summary": {"a": 1, "cap": {"x": "1"}}, "errors": ["e"], "same": [1]}
    new = {"summary": {"a": 2, "cap": {}}, "same": [1], "added": True}
    assert merge_diff(old, new) == {
        "summary": {"a": 2, "cap": {"x": None}},
        "errors": None,
        "added": True,
    }
    assert merge_diff(new, new) == {}


def test_store_marks_old_and_new_pools_dirty() -> None:
    st = Store()
    a = ResourceSlice.from_object(rslice("s", [device("d")], pool="p1"))
    b = ResourceSlice.from_object(rslice("s", [device("d")], pool="p2"))
    assert st.put_slice("u1", a) == {(DRIVER, "p1")}
    assert st.put_slice("u1", b) == {(DRIVER, "p1"), (DRIVER, "p2")}
    assert st.pools() == {(DRIVER, "p2")}
    c1 = ResourceClaim.from_object(claim("c", result("d", pool="p2")))
    c2 = ResourceClaim.from_object(claim("c", result("d", pool="p3")))
    assert st.put_claim("c", c1) == {(DRIVER, "p2")}
    assert st.put_claim("c", c2) == {(DRIVER, "p2"), (DRIVER, "p3")}
    assert [r.device for r in st.allocations_of((DRIVER, "p3"))] == ["d"]
    assert st.delete_claim("c") == {(DRIVER, "p3")}
    assert st.allocations_of((DRIVER, "p3")) == []
    rule = DeviceTaintRule.from_object(taint_rule("r", pool="p2"))
    assert st.put_taint_rule("r", rule) == {(DRIVER, "p2")}
    assert st.delete_slice("u1") == {(DRIVER, "p2")} and st.pools() == set()


def test_token_bucket_paces_after_the_burst() -> None:
    """A fake clock: the burst costs no waiting, then one token per 1/qps seconds."""
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    async def take(n: int) -> None:
        bucket = TokenBucket(qps=50, burst=5, clock=lambda: now[0], sleep=sleep)
        for _ in range(n):
            await bucket.take()

    asyncio.run(take(5))
    assert slept == []
    asyncio.run(take(15))
    assert len(slept) == 10 and abs(sum(slept) - 10 / 50) < 1e-9


def test_store_keeps_models_of_pending_claims_only() -> None:
    st = Store()
    st.put_claim("a", ResourceClaim.from_object(claim("a", result("d"))))
    st.put_claim("p", ResourceClaim.from_object(claim("p")))
    assert set(st.claim_uids()) == {"a", "p"}
    assert [c.name for c in st.pending_claims()] == ["p"]
    # Allocated claims still count through their allocations.
    assert [r.device for r in st.allocations_of((DRIVER, "pool-a"))] == ["d"]


def test_store_claims_in_one_and_in_several_pools_with_one_and_several_devices() -> None:
    """Single refs and single pools are kept without a tuple around them; what is read
    back, re-put and deleted is the same either way."""
    st = Store()
    a, b = (DRIVER, "pool-a"), (DRIVER, "pool-b")
    one = ResourceClaim.from_object(claim("one", result("d1")))
    two = ResourceClaim.from_object(claim("two", result("d2"), result("d3")))
    wide = ResourceClaim.from_object(claim("wide", result("d4"), result("e1", pool="pool-b")))
    assert st.put_claim("one", one) == {a}
    assert st.put_claim("two", two) == {a}
    assert st.put_claim("wide", wide) == {a, b}
    assert sorted(r.device for r in st.allocations_of(a)) == ["d1", "d2", "d3", "d4"]
    assert [r.claim_name for r in st.allocations_of(b)] == ["wide"]
    # Allocated with no result: no pool, no model, still a claim.
    empty = ResourceClaim.from_object(claim("empty")).model_copy(update={"allocated": True})
    assert st.put_claim("empty", empty) == set()
    assert sorted(st.claim_uids()) == ["empty", "one", "two", "wide"]
    # A claim moving from two pools to one: both dirty, the old refs gone.
    moved = ResourceClaim.from_object(claim("wide", result("e2", pool="pool-b")))
    assert st.put_claim("wide", moved) == {a, b}
    assert [r.device for r in st.allocations_of(b)] == ["e2"]
    assert "d4" not in {r.device for r in st.allocations_of(a)}
    for uid in ("one", "two", "wide", "empty"):
        st.delete_claim(uid)
    assert st.claim_uids() == [] and st.pool_allocs == {} and st.claim_pools == {}


def _controller() -> Controller:
    return Controller(Writer(None, TokenBucket(1, 1)), Settings())  # type: ignore[arg-type]


def _slice_informer(ctl: Controller) -> Informer:
    """The slice informer as build_informers makes it, without a server to talk to."""
    known = lambda: set(ctl.store.uids("slice"))  # noqa: E731
    return Informer("slice", "resourceslices", None, "", "v1", ctl.ingest.slice_event, known)


def test_a_relist_prunes_what_it_missed_but_keeps_what_a_watch_added_meanwhile() -> None:
    ctl = _controller()
    for name in ("kept", "gone"):
        ctl.ingest.slice_event("ADDED", rslice(name, [device("d")], pool=name))
    informer = _slice_informer(ctl)
    before = informer.known()
    listed = informer.apply_page([rslice("kept", [device("d")], pool="kept")])
    # A watch event between two pages: newer than the list, so not in it.
    ctl.ingest.slice_event("ADDED", rslice("new", [device("d")], pool="new"))
    informer.prune(before, listed)
    assert {s.name for s in ctl.store.slices.values()} == {"kept", "new"}


def test_the_interner_is_bounded_by_what_live_slices_need() -> None:
    ctl = _controller()
    devs = [device(f"d{i}", uuid=f"GPU-{i}") for i in range(4)]
    ctl.ingest.slice_event("ADDED", rslice("s", devs))
    ctl.ingest.listed()
    assert ctl.ingest.interner_limit == INTERNER_MIN
    ctl.ingest.interner_limit = len(ctl.ingest.interner)  # as if the live slices had filled it
    ctl.ingest.slice_event("ADDED", rslice("t", [device("x", uuid="GPU-x")], pool="other"))
    ctl.ingest.slice_event("ADDED", rslice("u", [device("y", uuid="GPU-y")], pool="third"))
    # Cleared once past the limit, then refilled only by what was read since.
    assert 0 < len(ctl.ingest.interner) <= ctl.ingest.interner_limit
    assert {s.name for s in ctl.store.slices.values()} == {"s", "t", "u"}


def test_a_version_already_applied_is_skipped_whatever_its_spelling() -> None:
    """Versions are kept as ints when they are plain decimals; a version spelled
    differently ("07", a non-ASCII digit) is another version, never the same int."""
    ctl = _controller()
    obj = rslice("s", [device("d")])
    seen = ctl.ingest._seen
    for rv, new in [
        ("12345", True),
        ("12345", False),
        ("012345", True),
        ("012345", False),
        ("12345", True),
        ("١٢٣٤٥", True),  # Arabic-Indic digits: int() would read 12345
        ("12345", True),
        ("99999999999999999999", True),  # past 18 digits: kept as text
        ("99999999999999999999", False),
    ]:
        obj["metadata"]["resourceVersion"] = rv
        assert (seen(obj) is not None) is new, rv
    assert type(ctl.ingest.versions[obj["metadata"]["uid"]]) is str
    obj["metadata"]["resourceVersion"] = "7"
    seen(obj)
    assert ctl.ingest.versions[obj["metadata"]["uid"]] == 7
