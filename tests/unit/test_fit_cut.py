"""explain/fit_cut.py: asked again after a claim change, `fit` keeps the node searches the
change leaves standing and searches only the rest, and answers as a new question, the
searches it kept counted as a new question counts them (the budget ends alike)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from builders import claim, counter_pool, device, device_class, result, rslice, world
from test_fit import nobody, template

from draview.api.workload import read_workload
from draview.api.world import World
from draview.engine.allocations import index_allocations
from draview.engine.world import compute_world
from draview.explain import search
from draview.explain.fit import FitResult, fit
from draview.explain.fit_memo import FitMemo

POOL = "node-a"
MIG = {"cel": {"expression": "device.attributes['gpu.example.com'].kind == 'mig'"}}


def _node(taken: list[str], sets: int = 3, per_set: int = 3, other: bool = False) -> World:
    """One node's pool: `sets` counter sets of mem 2, each debited 1 by `per_set` MIG
    devices in a row (so two of them fit), and with `other` a device of another kind
    that debits nothing; `taken`: devices held by claims."""
    devices = [
        device(f"p{i}", counters={f"s{i // per_set}": {"mem": "1"}}, kind="mig")
        for i in range(sets * per_set)
    ]
    if other:
        devices.append(device("x0", kind="full"))
    counters = {f"s{k}": {"mem": "2"} for k in range(sets)}
    objs = [device_class(), *counter_pool(POOL, devices, counters, pool=POOL, node=POOL)]
    return world(*objs, *(claim(f"c-{d}", result(d, pool=POOL)) for d in taken))


def _asked_again(
    before: World, after: World, monkeypatch: pytest.MonkeyPatch
) -> tuple[FitResult, FitResult, int, int]:
    """A probe's two askings (the pool judged again in between, every other result the
    same object) and a new question of `after`: the second answer, the new one, and the
    node searches each ran."""
    after = replace(before, claims=after.claims)  # the same slices: only claims change
    workload = read_workload([template(selectors=[MIG])], nobody)
    memo = FitMemo()
    results = compute_world(before)
    fit(before, workload, results=results, memo=memo)
    base = index_allocations(after.claims)
    again = compute_world(after, None, results, {("gpu.example.com", POOL)}, base)
    runs = [0]
    real = search.NodeSearch.run

    def counted(self: search.NodeSearch) -> str:
        runs[0] += 1
        return real(self)

    monkeypatch.setattr(search.NodeSearch, "run", counted)
    got = fit(after, workload, results=again, allocations=base, memo=memo)
    ran = runs[0]
    runs[0] = 0
    fresh = fit(after, workload)
    return got, fresh, ran, runs[0]


def _same(got: FitResult, fresh: FitResult) -> None:
    assert (got.copies, got.blocker, got.first_node, got.first, got.searches) == (
        fresh.copies,
        fresh.blocker,
        fresh.first_node,
        fresh.first,
        fresh.searches,
    )
    assert [e.to_dict() for e in got.blocked] == [e.to_dict() for e in fresh.blocked]


def test_searches_that_end_before_the_change_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Six copies on p0 p1, p3 p4, p6 p7; p8 taken: the copies on the first two sets
    walked nothing of s2 and stand; the fifth copy and the search that finds no sixth
    are searched again."""
    got, fresh, ran, new = _asked_again(_node([]), _node(["p8"]), monkeypatch)
    _same(got, fresh)
    assert (got.copies, fresh.searches, new, ran) == (5, 6, 6, 2)


def test_a_freed_device_reaches_every_search_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """p1 freed in the first set: every search walked past it, so all go (the one that
    found nothing too: now something is free)."""
    got, fresh, ran, new = _asked_again(_node(["p1"]), _node([]), monkeypatch)
    _same(got, fresh)
    assert (got.copies, ran) == (6, new)


def test_a_change_that_only_takes_keeps_what_found_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every MIG device spent: the one search finds nothing. Another claim takes x0,
    which debits nothing and which no copy asks for: what found nothing still finds
    nothing. Freed again, it is searched anew."""
    full = ["p0", "p1"]
    got, fresh, ran, new = _asked_again(
        _node(full, sets=1, other=True), _node([*full, "x0"], sets=1, other=True), monkeypatch
    )
    _same(got, fresh)
    assert (got.copies, new, ran) == (0, 1, 0)
    got, fresh, ran, new = _asked_again(
        _node([*full, "x0"], sets=1, other=True), _node(full, sets=1, other=True), monkeypatch
    )
    _same(got, fresh)
    assert (got.copies, ran) == (0, 1)


def test_a_taken_device_a_copy_held_moves_that_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """p3 taken by a claim: the third copy (on p3) and those after it are searched
    again, the first two stand."""
    got, fresh, ran, new = _asked_again(_node([]), _node(["p3"]), monkeypatch)
    _same(got, fresh)
    assert got.copies == 5 and ran == new - 2


def test_a_device_without_counters_moves_when_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """No counters: a claim taking g1 moves the copy that held it (and those after), not
    the one on g0."""

    def plain(taken: list[str]) -> World:
        devices = [device(f"g{i}", kind="mig") for i in range(3)]
        objs = [device_class(), rslice(POOL, devices, pool=POOL, node=POOL)]
        return world(*objs, *(claim(f"c-{d}", result(d, pool=POOL)) for d in taken))

    got, fresh, ran, new = _asked_again(plain([]), plain(["g1"]), monkeypatch)
    _same(got, fresh)
    assert got.copies == 2 and ran < new
