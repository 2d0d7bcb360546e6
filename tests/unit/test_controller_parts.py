"""Pure parts of the controller: merge patches, the store's dirty pools, the token bucket."""

from __future__ import annotations

import asyncio

from builders import DRIVER, claim, device, result, rslice, taint_rule

from draview.api.claims import ResourceClaim
from draview.api.slices import ResourceSlice
from draview.api.taints import DeviceTaintRule
from draview.controller.mergepatch import merge_diff
from draview.controller.ratelimit import TokenBucket
from draview.controller.store import Store


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
