"""PendingClaimExplainer: one Event per change of explanation per pending claim."""

from __future__ import annotations

from typing import Any

from builders import claim, device, device_class, result, rslice, world

from draview.api.claims import ResourceClaim
from draview.controller.claim_events import REASON, PendingClaimExplainer, event_body
from draview.engine.world import compute_world

CLASS = device_class()
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def pending(name: str, count: int = 1, created: str = "2023-11-14T22:13:20Z") -> ResourceClaim:
    obj: dict[str, Any] = claim(name)
    obj["metadata"]["creationTimestamp"] = created
    obj["spec"]["devices"]["requests"][0]["exactly"]["count"] = count
    return ResourceClaim.from_object(obj)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def test_once_per_change() -> None:
    w = world(CLASS, rslice("s", [device("gpu-0"), device("gpu-1")]), claim("c", result("gpu-0")))
    results = compute_world(w)
    clock = Clock()
    ev = PendingClaimExplainer(threshold=30, clock=clock)
    want3 = pending("want3", count=3)
    # Younger than the threshold: nothing yet.
    assert ev.due([want3], results, w.classes) == []
    clock.now += 31
    first = ev.due([want3], results, w.classes)
    assert [(c.name, m) for c, m in first] == [
        ("want3", "request gpu: needs 3, 1 of 2 matching devices free (1 Allocated)")
    ]
    # Same explanation on the next batches: no new Event.
    assert ev.due([want3], results, w.classes) == []
    assert ev.due([want3], results, w.classes) == []
    # The pool changes (gpu-0 freed): the explanation changes, one new Event.
    w2 = world(CLASS, rslice("s", [device("gpu-0"), device("gpu-1")]))
    second = ev.due([want3], compute_world(w2), w2.classes)
    assert len(second) == 1 and "2 of 2 matching devices free" in second[0][1]
    assert ev.due([want3], compute_world(w2), w2.classes) == []


def test_allocatable_and_allocated_claims_get_no_event() -> None:
    w = world(CLASS, rslice("s", [device("gpu-0")]))
    results = compute_world(w)
    clock = Clock()
    clock.now += 3600
    ev = PendingClaimExplainer(threshold=30, clock=clock)
    fits = pending("fits")
    done = ResourceClaim.from_object(claim("done", result("gpu-0")))
    assert ev.due([fits, done], results, w.classes) == []


def test_forgotten_claims_are_news_again() -> None:
    w = world(CLASS, rslice("s", [device("gpu-0")]), claim("c", result("gpu-0")))
    results = compute_world(w)
    clock = Clock()
    clock.now += 60
    ev = PendingClaimExplainer(threshold=30, clock=clock)
    p = pending("p")
    assert len(ev.due([p], results, w.classes)) == 1
    assert ev.due([], results, w.classes) == []  # deleted (or allocated)
    assert len(ev.due([p], results, w.classes)) == 1


def test_event_body() -> None:
    p = pending("p")
    body = event_body(p, "x" * 2000, "draview-0", "resource.k8s.io/v1")
    assert body["reason"] == REASON and body["type"] == "Warning"
    assert body["regarding"]["kind"] == "ResourceClaim" and body["regarding"]["name"] == "p"
    assert len(body["note"]) == 1024
    assert body["eventTime"].endswith("Z") and "." in body["eventTime"]


class Results:
    """The results callable, counting how often it is asked."""

    def __init__(self, results: Any) -> None:
        self.results = results
        self.asked = 0

    def __call__(self) -> Any:
        self.asked += 1
        return self.results


def test_a_round_with_nothing_changed_explains_nothing() -> None:
    w = world(CLASS, rslice("s", [device("gpu-0")]), claim("c", result("gpu-0")))
    results = Results(compute_world(w))
    clock = Clock()
    clock.now += 60
    ev = PendingClaimExplainer(threshold=30, clock=clock)
    p = pending("p")
    assert len(ev.due([p], results, w.classes, version=1)) == 1
    assert ev.due([p], results, w.classes, version=1) == []
    assert results.asked == 1  # the second round did not even unpack the pools
    # A new claim due: explained, though nothing else changed.
    assert len(ev.due([p, pending("q")], results, w.classes, version=1)) == 1
    assert results.asked == 2
    # Something changed: every claim is looked at again (same explanations: no Event).
    assert ev.due([p, pending("q")], results, w.classes, version=2) == []
    assert results.asked == 3
    # Without a version, every round explains.
    ev.due([p, pending("q")], results, w.classes)
    assert results.asked == 4


class Timer:
    """A timer that advances one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_a_round_stops_at_its_budget_and_the_next_goes_on_from_there() -> None:
    w = world(CLASS, rslice("s", [device("gpu-0")]), claim("c", result("gpu-0")))
    results = Results(compute_world(w))
    clock = Clock()
    clock.now += 60
    ev = PendingClaimExplainer(threshold=30, clock=clock, timer=Timer())
    claims = [pending(n, count) for n, count in (("a", 1), ("b", 2), ("c", 3))]
    # The timer moves 1 s per read and the budget is 1.5 s: two claims a round.
    first = ev.due(claims, results, w.classes, version=1, budget=1.5)
    assert [c.name for c, _ in first] == ["a", "b"]
    # Same version, but the round was cut short: not skipped; c first (never explained).
    second = ev.due(claims, results, w.classes, version=1, budget=1.5)
    assert [c.name for c, _ in second] == ["c"]
    # Every claim explained at version 1 now: skipped until something changes.
    assert ev.due(claims, results, w.classes, version=1, budget=1.5) == []
    asked = results.asked
    ev.due(claims, results, w.classes, version=2, budget=1.5)
    assert results.asked == asked + 1
    # After a change the rounds rotate: the one explained last was b (a, b at version
    # 2), so the next round starts at c, then a.
    ev.due(claims, results, w.classes, version=3, budget=1.5)
    assert ev._cursor == "default/a"


def test_claims_that_ask_for_the_same_devices_cost_the_budget_once() -> None:
    w = world(CLASS, rslice("s", [device("gpu-0")]), claim("c", result("gpu-0")))
    clock = Clock()
    clock.now += 60
    ev = PendingClaimExplainer(threshold=30, clock=clock, timer=Timer())
    alike = [pending(n) for n in ("a", "b", "c", "d")]
    due = ev.due([*alike, pending("e", 2)], compute_world(w), w.classes, budget=0.5)
    # The timer moves 1 s per read: one explanation (a's) for a to d, then the budget
    # is past before e's.
    assert [c.name for c, _ in due] == ["a", "b", "c", "d"]
    assert len({m for _, m in due}) == 1
