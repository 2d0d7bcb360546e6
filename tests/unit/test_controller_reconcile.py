"""The reconciler keeps each judged pool lean, its status bodies packed, and gives them
back whole to what reads them (explanations of pending claims)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from test_controller_batches import RecordingWriter

from draview.api.world import build_world
from draview.cli.inputs import parse_text
from draview.controller.core import Controller, Settings
from draview.controller.reconcile import _lean
from draview.engine.allocations import index_allocations
from draview.engine.pool import compute_pool
from draview.engine.pools import group_slices

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class KeepingWriter(RecordingWriter):
    def submit(
        self, desired: Any, removed: Any, started: float | None = None, then: Any = None
    ) -> Any:
        self.objects = list(desired)
        return super().submit(self.objects, removed, started, then)


async def _judged_mig_pool(claim_events: bool) -> tuple[KeepingWriter, Controller]:
    writer = KeepingWriter()
    ctl = Controller(writer, Settings(claim_events=claim_events))
    ctl.leader = True
    for obj in parse_text((EXAMPLES / "mig-a100.yaml").read_text(), "mig-a100.yaml"):
        kind = obj.get("kind")
        if kind == "ResourceSlice":
            ctl.ingest.slice_event("ADDED", obj)
        elif kind == "ResourceClaim":
            ctl.ingest.claim_event("ADDED", obj)
    await ctl.worker.flush()
    return writer, ctl


async def test_a_judged_pool_is_kept_lean_and_unpacked_whole() -> None:
    writer, ctl = await _judged_mig_pool(claim_events=True)
    key = ("gpu.example.com", "gpu-node-1")
    lean = ctl.reconciler.results[key]
    assert lean.slices == [] and set(lean.status) == {"conditions"}
    assert lean.prepared is not None  # the next judgement reuses it
    (full,) = ctl.reconciler.full_results()
    written = {o["metadata"]["name"]: o["status"] for o in writer.objects}
    pool_status = next(o["status"] for o in writer.objects if o["kind"] == "ResourcePoolStatus")
    assert full.status == pool_status
    assert full.status["counterSets"] and len(full.slices) == 2
    for sr in full.slices:
        assert sr.status == written[sr.slice.name]


async def test_without_claim_events_no_status_bodies_are_kept() -> None:
    # Explanations are the only reader of the bodies: with claim events off the pool is
    # judged and written the same, and nothing is packed.
    writer, ctl = await _judged_mig_pool(claim_events=False)
    key = ("gpu.example.com", "gpu-node-1")
    assert key in ctl.reconciler.results and writer.objects
    assert ctl.reconciler.full_result(key) is None
    assert ctl.reconciler.full_results() == []


def test_equal_condition_lists_are_kept_once_and_apart_from_what_is_written() -> None:
    from draview.controller.reconcile import _Conditions

    shared = _Conditions(most=2)
    ok = [{"type": "Complete", "status": "True", "reason": "AllSlices"}]
    first = shared.share([dict(c) for c in ok])
    assert shared.share([dict(c) for c in ok]) is first
    written = [dict(c) for c in ok]
    kept = shared.share(written)
    written[0]["status"] = "False"  # the written object changes later: the kept list not
    assert kept[0]["status"] == "True"
    other = [{"type": "Complete", "status": "False", "reason": "Missing"}]
    assert shared.share(other) is not first
    # Past `most` distinct lists it starts again (sharing lost, nothing wrong).
    shared.share([{"type": "Valid", "status": "True"}])
    assert len(shared.lists) == 1
    # A value that cannot be a key: the list is kept as it is.
    odd = [{"type": "Complete", "status": "True", "extra": ["x"]}]
    assert shared.share(odd) is odd


def _slice(name: str, pool: str, node: str, *devices: str, count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
            "nodeName": node,
            "devices": [{"name": d} for d in devices],
        },
    }


async def test_an_invalid_pool_on_134_judges_every_pool_again() -> None:
    from draview.engine.model import EngineOptions
    from draview.engine.profile import make_profile

    writer = KeepingWriter()
    options = EngineOptions(profile=make_profile("1.34"))
    ctl = Controller(writer, Settings(claim_events=False, engine=options))
    ctl.leader = True
    ctl.ingest.slice_event("ADDED", _slice("other", "other", "node-b", "gpu-2"))
    await ctl.worker.flush()

    def state(name: str) -> tuple[str, str | None]:
        sr = next(o["status"] for o in writer.objects if o["metadata"]["name"] == name)
        d = sr["devices"][0]
        return d["state"], d.get("stateReason")

    assert state("other") == ("Available", None)
    # node-a's pool "bad" names gpu-0 twice: 1.34's walk on node-a aborts every attempt
    # for gpu-2, which node-a cannot allocate.
    ctl.ingest.slice_event("ADDED", _slice("bad-1", "bad", "node-a", "gpu-0", count=2))
    ctl.ingest.slice_event("ADDED", _slice("bad-2", "bad", "node-a", "gpu-0", count=2))
    await ctl.worker.flush()
    assert ("gpu.example.com", "other") in ctl.queue.dirty  # judged again, next batch
    await ctl.worker.flush()
    assert state("other") == ("Unavailable", "InvalidPoolAborts")
    # The duplicate goes: gpu-2 is allocatable again.
    ctl.ingest.slice_event("DELETED", _slice("bad-2", "bad", "node-a", "gpu-0", count=2))
    await ctl.worker.flush()
    await ctl.worker.flush()
    assert state("other") == ("Available", None)


def test_a_lean_result_keeps_every_field_but_the_bodies() -> None:
    # _lean builds the PoolResult field by field: a field added to PoolResult later must
    # be carried over there too, or the reconciler silently drops it.
    w = build_world(parse_text((EXAMPLES / "mig-a100.yaml").read_text(), "mig-a100.yaml"))
    key, slices = next(iter(group_slices(w.slices).items()))
    result = compute_pool(key, slices, index_allocations(w.claims).get(key, ()))
    lean = _lean(result)
    for f in fields(result):
        if f.name not in ("status", "slices", "lefts"):
            assert getattr(lean, f.name) is getattr(result, f.name), f.name
    assert lean.slices == [] and set(lean.status) == {"conditions"}
    # What the judgement left of the counters serves a search of the whole result only
    # (capacity probes judge the pool whole, or take the batch's): not kept per pool.
    assert result.lefts and lean.lefts is None
