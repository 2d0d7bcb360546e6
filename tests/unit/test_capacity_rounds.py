"""Which capacity probes a round asks again (controller/capacity.py), in process: the
controller's real store and reconciler, no API server (nothing here is written)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from builders import DRIVER, counter_pool, device, device_class, rslice
from builders import claim as allocated
from prometheus_client import REGISTRY
from test_controller_batches import RecordingWriter, controller

from draview.api.probes import ProbeSpec
from draview.controller.core import Controller, Settings
from draview.engine.model import EngineOptions
from draview.engine.profile import make_profile

NIC = "nic.example.com"


def claim(mode: str = "ExactCount") -> dict[str, object]:
    request = {"name": "r", "exactly": {"deviceClassName": DRIVER, "allocationMode": mode}}
    return {"devices": {"requests": [request]}}


async def test_a_probe_is_asked_again_only_when_a_pool_it_counts_on_changes() -> None:
    ctl, _ = controller()
    ctl.ingest.class_event("ADDED", device_class())
    ctl.ingest.slice_event("ADDED", rslice("gpus", [device("g0"), device("g1")], pool="gpus"))
    ctl.ingest.slice_event("ADDED", rslice("nics", [device("n0")], pool="nics", driver=NIC))
    gpus, nics = (DRIVER, "gpus"), (NIC, "nics")
    ctl.reconciler.compute([gpus, nics])
    cap = ctl.capacity
    probes = {
        "one": ProbeSpec("one", "ns/cm:k", claim=claim()),
        # All matching devices: refused where any pool is incomplete, so every pool counts.
        "all": ProbeSpec("all", "ns/cm:k", claim=claim("All")),
    }
    cap.define(probes, [], {})
    await cap._mark_due()
    assert cap.probes["one"].pools == {gpus}
    assert cap.probes["all"].pools == {gpus, nics}
    answer = await cap._ask(cap.probes["one"])
    assert (answer.copies, answer.max_copies, answer.bounded) == (2, 2, False)

    def due() -> set[str]:
        return {n for n, p in cap.probes.items() if p.due}

    for p in cap.probes.values():
        p.due = False
    await cap._mark_due()
    assert due() == set(), "nothing was judged since"
    ctl.reconciler.compute([nics])
    await cap._mark_due()
    assert due() == {"all"}
    for p in cap.probes.values():
        p.due = False
    ctl.reconciler.compute([gpus])
    await cap._mark_due()
    assert due() == {"one", "all"}


async def test_a_probe_asked_again_searches_only_the_node_whose_pool_changed() -> None:
    ctl, _ = controller()
    ctl.ingest.class_event("ADDED", device_class())
    ctl.ingest.slice_event("ADDED", rslice("a", [device("a0"), device("a1")], pool="a"))
    ctl.ingest.slice_event(
        "ADDED", rslice("b", [device("b0"), device("b1")], pool="b", node="node-b")
    )
    a, b = (DRIVER, "a"), (DRIVER, "b")
    ctl.reconciler.compute([a, b])
    cap = ctl.capacity
    cap.define({"one": ProbeSpec("one", "ns/cm:k", claim=claim())}, [], {})
    await cap._mark_due()
    probe = cap.probes["one"]
    first = await cap._ask(probe)
    nodes = {n["name"]: n["copies"] for n in first.status["nodes"]}
    assert (first.copies, nodes) == (4, {"node-a": 2, "node-b": 2})
    assert not probe.memo.reused
    kept_b = probe.judged[b].result

    taken = {"request": "gpu", "driver": DRIVER, "pool": "a", "device": "a0"}
    ctl.ingest.claim_event("ADDED", allocated("c", taken))
    ctl.reconciler.compute([a])
    await cap._mark_due()  # as each round does before asking
    again = await cap._ask(probe)
    nodes = {n["name"]: n["copies"] for n in again.status["nodes"]}
    assert (again.copies, nodes) == (3, {"node-a": 1, "node-b": 2})
    assert probe.memo.reused, "node-b's answer was searched again"
    assert probe.judged[b].result is kept_b, "pool b was judged again though nothing changed"
    assert (
        again.status["blocker"] == "request r: needs 1, 0 of 4 matching devices free (4 Allocated)"
    )

    ctl.ingest.claim_event("DELETED", allocated("c", taken))
    ctl.reconciler.compute([a])
    await cap._mark_due()
    back = await cap._ask(probe)
    assert (back.copies, back.status) == (4, first.status)


async def test_the_first_node_moves_on_when_its_pool_fills_and_back_when_it_frees() -> None:
    """The node the first copy goes to, kept as groups are placed again: when that
    node's pool fills (its second device still free, but its counter spent), the next
    node in order takes the first copy; freed, it is first again."""
    ctl, _ = controller()
    ctl.ingest.class_event("ADDED", device_class())
    for name in "abc":
        whole = {"gpu": {"mem": "1"}}
        devices = [device(f"{name}{i}", counters=whole) for i in range(2)]
        for obj in counter_pool(
            name, devices, {"gpu": {"mem": "1"}}, pool=name, node=f"node-{name}"
        ):
            ctl.ingest.slice_event("ADDED", obj)
    ctl.reconciler.compute([(DRIVER, name) for name in "abc"])
    cap = ctl.capacity
    cap.define({"one": ProbeSpec("one", "ns/cm:k", claim=claim())}, [], {})
    await cap._mark_due()
    probe = cap.probes["one"]
    assert (await cap._ask(probe)).status["firstNode"] == "node-a"
    taken = {"request": "gpu", "driver": DRIVER, "pool": "a", "device": "a0"}
    for event, first in (("ADDED", "node-b"), ("DELETED", "node-a")):
        ctl.ingest.claim_event(event, allocated("c", taken))
        ctl.reconciler.compute([(DRIVER, "a")])
        await cap._mark_due()
        assert (await cap._ask(probe)).status["firstNode"] == first
        assert probe.memo.reused


async def test_a_probe_takes_the_batchs_judgement_while_it_is_the_latest() -> None:
    """The pool a batch judged is handed to the probe whole, not judged or unpacked
    again; a judgement made after the round took it is not the latest, and is not used."""
    ctl, _ = controller()
    ctl.ingest.class_event("ADDED", device_class())
    ctl.ingest.slice_event("ADDED", rslice("a", [device("a0"), device("a1")], pool="a"))
    a = (DRIVER, "a")
    rec, cap = ctl.reconciler, ctl.capacity
    rec.compute([a])
    cap.define({"one": ProbeSpec("one", "ns/cm:k", claim=claim())}, [], {})
    await cap._mark_due()
    probe = cap.probes["one"]
    assert (await cap._ask(probe)).copies == 2
    assert rec.keep_fresh, "a round with probes keeps the batches' judgements"
    asked_again: list[object] = []
    real = rec.judge_again

    def judge_again(key: Any) -> Any:
        asked_again.append(key)
        return real(key)

    rec.judge_again = judge_again  # type: ignore[method-assign]
    taken = {"request": "gpu", "driver": DRIVER, "pool": "a", "device": "a0"}
    ctl.ingest.claim_event("ADDED", allocated("c", taken))
    rec.compute([a])
    await cap._mark_due()
    assert (await cap._ask(probe)).copies == 1
    assert asked_again == [], "the batch's judgement was made again"

    ctl.ingest.claim_event("DELETED", allocated("c", taken))
    rec.compute([a])
    await cap._mark_due()
    rec.compute([a])  # judged again after the round took the batch's: not the latest
    assert (await cap._ask(probe)).copies == 2
    assert asked_again == [a]
    await cap._mark_due()
    assert (await cap._ask(probe)).copies == 2

    ctl.capacity.role.leader = False
    await cap.round()
    assert not rec.keep_fresh and rec.take_fresh() == {}, "kept by a replica that does not ask"


async def test_a_bad_probe_answers_with_its_error_and_the_others_go_on() -> None:
    ctl, _ = controller()
    ctl.ingest.slice_event("ADDED", rslice("gpus", [device("g0")], pool="gpus"))
    ctl.reconciler.compute([(DRIVER, "gpus")])
    cap = ctl.capacity
    missing = ProbeSpec("tmpl", "ns/cm:k", template=("ml", "nope"), namespace="ml")
    unknown = ProbeSpec("unknown", "ns/cm:k", claim=claim())  # no such DeviceClass yet
    cap.define({"tmpl": missing, "unknown": unknown}, [], {("ml", "nope"): None})
    await cap._mark_due()
    bad = await cap._ask(cap.probes["tmpl"])
    assert bad.copies is None and 'resourceclaimtemplate "nope" not found' in bad.status["error"]
    unasked = await cap._ask(cap.probes["unknown"])
    assert unasked.copies is None and DRIVER in unasked.status["error"]
    # Both count as probes that cannot be asked; neither exports a count.
    for name, found in (("tmpl", bad), ("unknown", unasked)):
        cap.probes[name].answer = found
        cap._export(name, cap.probes[name])
    assert REGISTRY.get_sample_value("draview_capacity_probe_errors") == 2
    assert REGISTRY.get_sample_value("draview_capacity_fit", {"probe": "unknown"}) is None


async def test_an_asking_that_fails_leaves_the_next_to_gather_every_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug met in the middle of an asking (what it gathered perhaps half judged): the
    probe answers with the error, and the next asking, with nothing judged since, gives
    the answer of a probe asked anew."""
    import draview.controller.capacity as capacity

    ctl, _ = controller()
    ctl.ingest.class_event("ADDED", device_class())
    ctl.ingest.slice_event("ADDED", rslice("a", [device("a0"), device("a1")], pool="a"))
    ctl.reconciler.compute([(DRIVER, "a")])
    cap = ctl.capacity
    cap.define({"one": ProbeSpec("one", "ns/cm:k", claim=claim())}, [], {})
    await cap._mark_due()
    probe = cap.probes["one"]
    first = await cap._ask(probe)
    assert first.copies == 2

    def broken(*args: Any, **kw: Any) -> Any:
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(capacity, "fit", broken)
    failed = await cap._ask(probe)
    assert failed.copies is None and failed.status["error"] == "draview could not answer: bug"
    monkeypatch.undo()
    await cap._mark_due()
    again = await cap._ask(probe)
    assert (again.copies, again.status) == (2, first.status)


@pytest.mark.parametrize("release", ["1.34", "1.37"])
@pytest.mark.parametrize("seed", range(4))
async def test_a_probe_asked_again_after_each_change_answers_as_a_new_one(
    seed: int, release: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claims taken and given back, pools gone and back, a pool's slice replaced: the
    probe that patches what it gathered at each asking answers as one asked for the
    first time. 1.34 judges the world again from its slices to explain the next copy.
    After a claim change the kept probe is asked on the event loop (small), after the
    others in the worker thread."""
    import asyncio

    import draview.controller.capacity as capacity

    handed: list[str] = []
    to_thread = asyncio.to_thread

    async def counted(f: Any, *args: Any, **kw: Any) -> Any:
        handed.append(args[1].spec.name)
        return await to_thread(f, *args, **kw)

    monkeypatch.setattr(capacity.asyncio, "to_thread", counted)
    rng = random.Random(seed)
    engine = EngineOptions(profile=make_profile(release, {}))
    ctl = Controller(RecordingWriter(), Settings(claim_events=False, engine=engine))
    ctl.leader = True
    ctl.ingest.class_event("ADDED", device_class())
    slices = {
        name: rslice(name, [device(f"{name}{i}") for i in range(3)], pool=name, node=f"n-{name}")
        # Enough nodes that one changed is ranked in place, not all sorted again.
        for name in "abcdefghijkl"
    }
    for obj in slices.values():
        ctl.ingest.slice_event("ADDED", obj)
    ctl.reconciler.compute([(DRIVER, name) for name in slices])
    cap = ctl.capacity
    cap.define({"kept": ProbeSpec("kept", "ns/cm:k", claim=claim())}, [], {})
    await cap._mark_due()
    await cap._ask(cap.probes["kept"])
    held: dict[str, dict[str, Any]] = {}  # claim name -> object
    gone: set[str] = set()
    small = 0
    for step in range(30):
        handed.clear()
        sliced = False
        pool = rng.choice(sorted(slices))
        action = rng.random()
        if action < 0.15 and pool not in gone:
            ctl.ingest.slice_event("DELETED", slices[pool])
            gone.add(pool)
            sliced = True
        elif action < 0.3 and pool in gone:
            ctl.ingest.slice_event("ADDED", slices[pool])
            gone.discard(pool)
            sliced = True
        elif action < 0.4 and pool not in gone:
            # The pool's slice replaced: a device more or less, on another node.
            count = rng.randint(1, 4)
            slices[pool] = rslice(
                pool,
                [device(f"{pool}{i}") for i in range(count)],
                pool=pool,
                node=f"n-{pool}-{step}",
            )
            ctl.ingest.slice_event("MODIFIED", slices[pool])
            sliced = True
        elif held and action < 0.6:
            name = rng.choice(sorted(held))
            obj = held.pop(name)
            pool = obj["status"]["allocation"]["devices"]["results"][0]["pool"]
            ctl.ingest.claim_event("DELETED", obj)
        else:
            dev = f"{pool}{rng.randrange(3)}"
            taken = {"request": "gpu", "driver": DRIVER, "pool": pool, "device": dev}
            held[f"c{step}"] = allocated(f"c{step}", taken)
            ctl.ingest.claim_event("ADDED", held[f"c{step}"])
        ctl.reconciler.compute([(DRIVER, pool)])
        await cap._mark_due()
        kept = await cap._ask(cap.probes["kept"])
        if sliced:
            assert handed == ["kept"], (step, "slices changed: asked in the worker")
        small += not handed
        cap.define(
            {
                "kept": cap.probes["kept"].spec,
                f"new{step}": ProbeSpec(f"new{step}", "ns/cm:k", claim=claim()),
            },
            [],
            {},
        )
        await cap._mark_due()
        new = await cap._ask(cap.probes[f"new{step}"])
        assert kept.status == new.status, (step, pool, action)
        assert kept.per_node == new.per_node
    assert small >= 5, "claim changes are asked on the event loop"


async def test_a_probe_removed_while_it_is_asked_leaves_no_series(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The definitions are read again while a probe is asked in the worker thread, and
    the probe is gone: its answer, when it comes, is neither exported nor written."""
    import asyncio

    ctl, _ = controller()
    ctl.ingest.class_event("ADDED", device_class())
    ctl.ingest.slice_event("ADDED", rslice("a", [device("a0")], pool="a"))
    ctl.reconciler.compute([(DRIVER, "a")])
    cap = ctl.capacity
    cap.define({"going": ProbeSpec("going", "ns/cm:k", claim=claim())}, [], {})
    cap.role.leader = cap.role.synced = True
    cap.objects.held = {}  # the probe objects read: none yet
    written: list[dict[str, Any]] = []

    async def write(wanted: dict[str, Any], defined: Any) -> None:
        written.append({n: s for n, s in wanted.items() if defined(n)})

    monkeypatch.setattr(cap.objects, "write", write)
    real = asyncio.to_thread

    async def to_thread(f: Any, *args: Any, **kw: Any) -> Any:
        cap.define({}, [], {})  # read again meanwhile: no probe defined
        return await real(f, *args, **kw)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    await cap.round()
    assert "going" not in cap.probes
    assert REGISTRY.get_sample_value("draview_capacity_fit", {"probe": "going"}) is None
    assert written == [{}]
