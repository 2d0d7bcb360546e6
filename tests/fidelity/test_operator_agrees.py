"""The operator and `draview analyze` agree on every world an API server accepts.

Both run the same engine, but the operator reads objects one watch event at a time into
its store (allocations apart from the rest of a claim, slices through the fast reader,
rules per pool), and `analyze` reads a dump. The generator's worlds are full of the odd
but valid things drivers and users produce; for each, the objects the operator would
write must be exactly the objects `analyze` prints. The operator does not watch Nodes,
so `analyze` is given the world without them.
"""

from __future__ import annotations

import os
from typing import Any

from tests.fidelity.worldgen import generate

from draview.api.world import build_world
from draview.controller.core import Controller, Settings
from draview.controller.ratelimit import TokenBucket
from draview.controller.writer import Writer
from draview.engine.world import world_objects

SEEDS = range(int(os.environ.get("DRAVIEW_FIDELITY_OPERATOR_SEEDS", "200")))
EVENTS = {"ResourceSlice": "slice_event", "ResourceClaim": "claim_event"}


def _operator_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ctl = Controller(Writer(None, TokenBucket(1, 1)), Settings())  # type: ignore[arg-type]
    ctl.leader = True
    for obj in objects:
        kind = obj.get("kind")
        if kind in EVENTS:
            getattr(ctl, EVENTS[kind])("ADDED", obj)
        elif kind == "DeviceTaintRule":
            ctl.taint_rule_event("ADDED", obj)
        elif kind == "DeviceClass":
            ctl.class_event("ADDED", obj)
    desired, _ = ctl.compute(ctl.store.pools())
    return desired


def _comparable(objs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for o in objs:
        status = dict(o.get("status") or {})
        # Condition times are stamped when computed; the states and texts must agree.
        for holder in (status, status.get("poolStatus") or {}):
            if "conditions" in holder:
                holder["conditions"] = [
                    {k: v for k, v in c.items() if k != "lastTransitionTime"}
                    for c in holder["conditions"]
                ]
        out[(o["kind"], o["metadata"]["name"])] = {"spec": o.get("spec"), "status": status}
    return out


def test_the_operator_writes_what_analyze_prints() -> None:
    failures = []
    compared = 0
    for seed in SEEDS:
        objects = [o for o in generate(seed).objects if o.get("kind") != "Node"]
        mine = _comparable(_operator_objects(objects))
        theirs = _comparable(world_objects(build_world(objects)))
        compared += len(theirs)
        if mine != theirs:
            keys = sorted(set(mine) ^ set(theirs)) or sorted(
                k for k in mine if mine[k] != theirs.get(k)
            )
            failures.append(f"seed {seed}: {keys[:3]}")
    assert compared > 10 * len(SEEDS)
    assert not failures, "\n".join(failures[:10])
