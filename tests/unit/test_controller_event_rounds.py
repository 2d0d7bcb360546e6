"""Explanations in the operator: a round unpacks and indexes only the pools judged since
the last one, lets other work run between its steps, explains claims that ask for the
same devices once, and names the devices only of pools that have a problem."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from builders import DRIVER, claim, device, device_class, rslice, taint_rule
from test_controller_batches import RecordingWriter

from draview.controller import event_rounds
from draview.controller.claim_events import PendingClaimExplainer
from draview.controller.core import Controller, Settings

CLASS = device_class()


def wanting(name: str, count: int) -> dict[str, Any]:
    obj = claim(name)
    obj["spec"]["devices"]["requests"][0]["exactly"]["count"] = count
    return obj


async def operator(pools: int, *claims: dict[str, Any]) -> tuple[Controller, list[tuple[str, str]]]:
    """A leader with `pools` one-GPU pools, each on its own node, and these claims."""
    posted: list[tuple[str, str]] = []

    async def post(c: Any, message: str) -> None:
        posted.append((c.name, message))

    writer = RecordingWriter()
    ctl = Controller(writer, Settings(claim_events=True, pending_threshold=0.0), post)
    ctl.leader = True
    ctl.ingest.class_event("ADDED", CLASS)
    for i in range(pools):
        ctl.ingest.node_event("ADDED", {"metadata": {"name": f"n{i}", "labels": {}}})
        ctl.ingest.slice_event(
            "ADDED", rslice(f"s{i}", [device("gpu-0")], pool=f"p{i}", node=f"n{i}")
        )
    for c in claims:
        ctl.ingest.claim_event("ADDED", c)
    await judge(ctl)
    return ctl, posted


async def judge(ctl: Controller) -> None:
    await ctl.worker.flush()
    await ctl.writer.drain()


def unpacked(ctl: Controller, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    real = ctl.reconciler.full_result

    def spy(key: Any) -> Any:
        seen.append(key[1])
        return real(key)

    monkeypatch.setattr(ctl.reconciler, "full_result", spy)
    return seen


async def test_a_round_unpacks_only_the_pools_judged_since_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctl, posted = await operator(5, wanting("pair", 2))
    seen = unpacked(ctl, monkeypatch)
    await ctl.explanations.explain_pending()
    assert sorted(seen) == [f"p{i}" for i in range(5)] and len(posted) == 1
    seen.clear()
    ctl.ingest.slice_event(
        "MODIFIED", rslice("s3", [device("gpu-0"), device("gpu-1")], pool="p3", node="n3")
    )
    await judge(ctl)
    await ctl.explanations.explain_pending()
    assert seen == ["p3"]
    said = ctl.explanations.explainer.last["uid-default-pair"]
    assert said.startswith("the allocator would allocate it on n3")  # p3 as it is now
    seen.clear()
    ctl.ingest.slice_event("DELETED", rslice("s1", [], pool="p1", node="n1"))
    await judge(ctl)
    await ctl.explanations.explain_pending()
    assert seen == [] and (DRIVER, "p1") not in ctl.explanations.sync.catalog.results
    # New DeviceTaintRules change every device's taints: every pool is indexed again.
    ctl.ingest.taint_rule_event("ADDED", taint_rule("all", driver=DRIVER))
    catalog = await event_rounds.run_steps(ctl.explanations.sync.refresh(ctl.store.rules()))
    assert sorted(seen) == ["p0", "p2", "p3", "p4"]
    assert all(d.taints for d in catalog.devices.devices)


async def test_a_round_lets_other_work_run_and_posts_what_one_piece_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctl, posted = await operator(40, wanting("pair", 2), wanting("one", 1))
    monkeypatch.setattr(event_rounds, "STEP_SECONDS", 0.0)
    turns = 0

    async def other() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    await ctl.explanations.explain_pending()
    task.cancel()
    assert turns > 40  # at least once per pool indexed and node searched
    store = ctl.store
    whole = PendingClaimExplainer(threshold=0.0).due(
        store.pending_claims(), ctl.reconciler.full_results(), store.classes.values()
    )
    assert posted == [(c.name, m) for c, m in whole] and len(posted) == 1


async def test_claims_that_ask_for_the_same_devices_are_explained_once_a_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctl, posted = await operator(3, *(wanting(f"pair-{i}", 2) for i in range(3)), wanting("x", 4))
    explainer = ctl.explanations.explainer.explainer
    asked: list[str] = []
    real = explainer.explain_steps

    def spy(c: Any, *args: Any, **kw: Any) -> Any:
        asked.append(c.name)
        return real(c, *args, **kw)

    monkeypatch.setattr(explainer, "explain_steps", spy)
    await ctl.explanations.explain_pending()
    assert sorted(asked) == ["pair-0", "x"]
    messages = dict(posted)
    assert len(posted) == 4 and messages["pair-1"] == messages["pair-2"] == messages["pair-0"]
    assert messages["x"] != messages["pair-0"]


async def test_slice_problems_name_the_devices_only_of_pools_with_a_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[Any] = []

    async def post_slice(ev: Any) -> None:
        events.append(ev)

    ctl, _ = await operator(6)
    ctl.explanations.post_slice_event = post_slice
    for name in ("a", "b"):  # the same device in two slices of one pool: invalid
        ctl.ingest.slice_event("ADDED", rslice(name, [device("gpu-0")], pool="dup", count=2))
    await judge(ctl)
    named: list[Any] = []
    real = event_rounds.pool_slices

    def spy(result: Any, unreadable: Any = None) -> Any:
        named.append(result.key[1])
        return real(result, unreadable)

    monkeypatch.setattr(event_rounds, "pool_slices", spy)
    await ctl.explanations.report_slice_problems()
    assert named == ["dup"]
    assert {(e.slice_name, e.reason) for e in events} == {
        ("a", "DuplicateDevice"),
        ("b", "DuplicateDevice"),
    }


async def test_a_large_refresh_runs_without_the_cyclic_collector_then_turns_it_back_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    ctl, _ = await operator(4)
    monkeypatch.setattr(event_rounds, "FREEZE_AFTER", 2)
    seen: list[bool] = []
    real = ctl.reconciler.full_result

    def spy(key: Any) -> Any:
        seen.append(gc.isenabled())
        return real(key)

    monkeypatch.setattr(ctl.reconciler, "full_result", spy)
    was_on = gc.isenabled()  # `draview analyze`, run in process by other tests, turns it off
    try:
        gc.enable()
        steps = ctl.explanations.sync.refresh([])
        next(steps)
        next(steps)  # the first pool indexed, the collector off
        steps.close()  # a round cut short (the task cancelled): on again all the same
        assert seen == [False] and gc.isenabled()
        await event_rounds.run_steps(ctl.explanations.sync.refresh([]))
        assert seen[1:] == [False, False, False] and gc.isenabled()
        gc.disable()  # off before (a first sync under sync.long_lived): left off
        ctl.ingest.taint_rule_event("ADDED", taint_rule("all", driver=DRIVER))
        await event_rounds.run_steps(ctl.explanations.sync.refresh(ctl.store.rules()))
        assert len(seen) == 8 and not gc.isenabled()
    finally:
        gc.unfreeze()
        if was_on:
            gc.enable()
