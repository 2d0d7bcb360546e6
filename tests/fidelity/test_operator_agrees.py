"""The operator and `draview analyze` agree on every world an API server accepts, and
on damaged worlds too.

Both run the same engine, but the operator reads objects one watch event at a time into
its store (allocations apart from the rest of a claim, slices through the fast reader,
rules per pool), and `analyze` reads a dump. The generator's worlds are full of the odd
but valid things drivers and users produce; for each, the objects the operator would
write must be exactly the objects `analyze` prints. Both are given the world's Nodes;
a world without Node objects stands for an operator that may not watch them (RBAC), which
judges from assumed nodes as `analyze` does.

Damaged worlds (one to three odd values or removals anywhere in one slice, claim or
rule) are a superset of what an API server could hold: agreeing on all of them means
agreeing on every one it would.
"""

from __future__ import annotations

import os
import random
from typing import Any

from tests.fidelity.worldgen import generate
from tests.unit.damage import Edit, damaged, paths_of

from draview.api.world import build_world, is_resource_kind
from draview.controller.core import Controller, Settings
from draview.controller.ratelimit import TokenBucket
from draview.controller.writer import Writer
from draview.engine.world import world_objects

SEEDS = range(int(os.environ.get("DRAVIEW_FIDELITY_OPERATOR_SEEDS", "200")))
DAMAGED_SEEDS = range(int(os.environ.get("DRAVIEW_FIDELITY_DAMAGED_SEEDS", "400")))
# Odd values of every JSON type, out-of-range numbers and absurd quantities.
ODD: list[Any] = [
    None,
    True,
    -1,
    0,
    2,
    1.5,
    "",
    "x",
    [],
    {},
    {"value": "1"},
    [{"name": "x"}],
    2**70,
    "9999999999999999999Ei",
]
EVENTS = {"ResourceSlice": "slice_event", "ResourceClaim": "claim_event"}


def _operator_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ctl = Controller(Writer(None, TokenBucket(1, 1)), Settings())  # type: ignore[arg-type]
    ctl.leader = True
    ctl.reconciler.nodes_watched = any(o.get("kind") == "Node" for o in objects)
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node" and obj.get("apiVersion") == "v1":
            ctl.ingest.node_event("ADDED", obj)
            continue
        if not isinstance(kind, str) or not is_resource_kind(obj, kind):
            continue  # kopf delivers only what its resource.k8s.io watches list
        if kind in EVENTS:
            getattr(ctl.ingest, EVENTS[kind])("ADDED", obj)
        elif kind == "DeviceTaintRule":
            ctl.ingest.taint_rule_event("ADDED", obj)
        elif kind == "DeviceClass":
            ctl.ingest.class_event("ADDED", obj)
    desired, _ = ctl.reconciler.compute(ctl.store.pools())
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


def differing(objects: list[dict[str, Any]]) -> tuple[int, list[tuple[str, str]]]:
    """How many objects `analyze` prints, and which the operator would write otherwise."""
    mine = _comparable(_operator_objects(objects))
    theirs = _comparable(world_objects(build_world(objects)))
    keys = sorted(set(mine) ^ set(theirs)) or sorted(k for k in mine if mine[k] != theirs.get(k))
    return len(theirs), keys


def damaged_world(seed: int) -> tuple[list[dict[str, Any]], str]:
    """World `seed` with one of its slices, claims or rules damaged, and what was done."""
    rng = random.Random(seed)
    objects = list(generate(seed).objects)
    if seed % 2:  # half without Nodes: an operator that may not watch them, as analyze
        objects = [o for o in objects if o.get("kind") != "Node"]
    targets = [
        i
        for i, o in enumerate(objects)
        if o.get("kind") in ("ResourceSlice", "ResourceClaim", "DeviceTaintRule")
    ]
    i = rng.choice(targets)
    paths = paths_of(objects[i])[1:]
    edits: list[Edit] = [
        (rng.choice(paths), rng.choice(ODD), rng.random() < 0.2) for _ in range(rng.randint(1, 3))
    ]
    objects[i] = damaged(objects[i], edits)
    return objects, f"{objects[i].get('kind')!r} {[(p, v, d) for p, v, d in edits]}"


def test_the_operator_writes_what_analyze_prints() -> None:
    failures = []
    compared = 0
    for seed in SEEDS:
        n, keys = differing(generate(seed).objects)
        compared += n
        if keys:
            failures.append(f"seed {seed}: {keys[:3]}")
    assert compared > 10 * len(SEEDS)
    assert not failures, "\n".join(failures[:10])


def test_they_agree_on_damaged_worlds() -> None:
    failures = []
    for seed in DAMAGED_SEEDS:
        objects, what = damaged_world(seed)
        try:
            _, keys = differing(objects)
        except Exception as exc:
            failures.append(f"seed {seed} ({what}): {type(exc).__name__}: {exc}")
            continue
        if keys:
            failures.append(f"seed {seed} ({what}): {keys[:2]}")
    assert not failures, "\n".join(failures[:10])
