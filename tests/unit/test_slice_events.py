"""Warning Events on ResourceSlices of invalid or long-incomplete pools: one per problem,
on the slice the problem names, deduplicated and at most `per_pass` per pass."""

from __future__ import annotations

from typing import Any

from builders import device, rslice, world

from draview.controller.slice_events import (
    SliceEvent,
    SliceProblemReporter,
    pool_slices,
    slice_event_body,
)
from draview.engine.world import compute_world


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pools(*objects: dict[str, Any]) -> list[Any]:
    w = world(*objects)
    unreadable: dict[Any, dict[str, str]] = {}
    for p in w.problems:
        if p.pool is not None:
            unreadable.setdefault(p.pool, {})[p.name] = f"uid-{p.name}"
    return [(r, pool_slices(r, unreadable.get(r.key))) for r in compute_world(w)]


DUPLICATE = (rslice("a", [device("gpu-0")], count=2), rslice("b", [device("gpu-0")], count=2))


def test_one_event_per_problem_on_the_slices_it_names_then_none() -> None:
    rep = SliceProblemReporter(clock=Clock())
    events = rep.due(pools(*DUPLICATE))
    assert {(e.slice_name, e.reason) for e in events} == {
        ("a", "DuplicateDevice"),
        ("b", "DuplicateDevice"),
    }
    assert all("gpu-0" in e.message and e.slice_uid == f"uid-{e.slice_name}" for e in events)
    assert rep.due(pools(*DUPLICATE)) == []  # deduplicated
    assert rep.due(pools(rslice("a", [device("gpu-0")]))) == []  # fixed: forgotten
    assert len(rep.due(pools(*DUPLICATE))) == 2  # broken again: news again


def test_at_most_per_pass_events_the_rest_later() -> None:
    rep = SliceProblemReporter(per_pass=1, clock=Clock())
    assert len(rep.due(pools(*DUPLICATE))) == 1
    assert len(rep.due(pools(*DUPLICATE))) == 1
    assert rep.due(pools(*DUPLICATE)) == []


def test_an_incomplete_pool_is_reported_after_the_threshold_only() -> None:
    clock = Clock()
    rep = SliceProblemReporter(threshold=60, clock=clock)
    half = pools(rslice("a", [device("gpu-0")], count=2))
    assert rep.due(half) == []
    clock.now += 61
    [ev] = rep.due(half)
    assert (ev.slice_name, ev.reason) == ("a", "PoolIncomplete") and "1 of 2" in ev.message
    clock.now += 600
    assert rep.due(half) == []


def test_an_incomplete_pool_is_reported_on_every_slice_of_its_newest_generation() -> None:
    # make demo's npu-node-1: generation 1 complete and stale, generation 2 half
    # published. The Event belongs on what the driver just published, not on gen1-a,
    # which sorts first and which the scheduler no longer reads.
    def update(*current: str) -> list[Any]:
        old = [rslice(f"gen1-{x}", [device(f"npu-{x}")], count=2) for x in "ab"]
        new = [rslice(f"gen2-{x}", [device(f"npu-{x}")], generation=2, count=3) for x in current]
        return pools(*old, *new)

    rep = SliceProblemReporter(threshold=0, clock=Clock())
    [ev] = rep.due(update("a"))
    assert (ev.slice_name, ev.reason) == ("gen2-a", "PoolIncomplete")
    assert "1 of 3" in ev.message and "generation 2" in ev.message
    events = rep.due(update("a", "b"))  # news: 2 of 3, said on both slices published
    assert sorted(e.slice_name for e in events) == ["gen2-a", "gen2-b"]
    assert {e.slice_uid for e in events} == {"uid-gen2-a", "uid-gen2-b"}


def test_a_problem_naming_a_device_of_both_generations_is_shown_on_the_newest() -> None:
    # Generation 2's gpu-0 consumes from a counter set nobody defines; generation 1,
    # stale, has a gpu-0 too, which the message names just as much.
    rep = SliceProblemReporter(clock=Clock())
    stale = rslice("old", [device("gpu-0")])
    new = rslice("new", [device("gpu-0", counters={"missing": {"mem": "1Gi"}})], generation=2)
    [ev] = rep.due(pools(stale, new))
    assert (ev.slice_name, ev.reason) == ("new", "CounterSetNotFound")


def test_an_unreadable_slice_gets_its_invalid_object_event() -> None:
    bad = rslice("broken", [device("gpu-0"), 5])  # type: ignore[list-item]
    rep = SliceProblemReporter(clock=Clock())
    [ev] = rep.due(pools(bad))
    assert (ev.slice_name, ev.slice_uid, ev.reason) == ("broken", "uid-broken", "InvalidObject")


def test_the_event_regards_the_slice_in_default() -> None:
    ev = SliceEvent("a", "uid-a", "DuplicateDevice", "x" * 3000)
    body = slice_event_body(ev, "draview-0", "resource.k8s.io/v1")
    assert body["metadata"]["namespace"] == "default" and body["type"] == "Warning"
    assert body["regarding"] == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "name": "a",
        "uid": "uid-a",
    }
    assert body["reason"] == "DuplicateDevice" and len(body["note"]) == 1024


async def test_the_controller_posts_them_once() -> None:
    from draview.controller.core import Controller, Settings
    from draview.controller.ratelimit import TokenBucket
    from draview.controller.writer import Writer

    posted: list[SliceEvent] = []

    async def post(ev: SliceEvent) -> None:
        posted.append(ev)

    ctl = Controller(Writer(None, TokenBucket(1, 1)), Settings(), None, post)  # type: ignore[arg-type]
    ctl.leader = True
    for obj in (*DUPLICATE, rslice("broken", [5], pool="p2")):  # type: ignore[list-item]
        ctl.ingest.slice_event("ADDED", obj)
    ctl.reconciler.compute(ctl.store.pools())
    await ctl.explanations.report_slice_problems()
    await ctl.explanations.report_slice_problems()
    assert sorted((e.slice_name, e.reason) for e in posted) == [
        ("a", "DuplicateDevice"),
        ("b", "DuplicateDevice"),
        ("broken", "InvalidObject"),
    ]
