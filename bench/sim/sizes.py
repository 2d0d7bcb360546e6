"""Where the controller's bytes go: its structures walked after a simulated first judgement.

The same world and controller as run.py (list, then the leader's full sync); then each
structure is walked object by object (sys.getsizeof, shared objects counted once, in the
order below: what an earlier row holds is not counted again). The rows sum to less than
the process's retained RSS: the rest is free space inside the allocator's arenas.

    python bench/sim/sizes.py --nodes 5000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as sim  # before world: world puts bench/engine (another run.py) first on the path
import world

from draview.controller.core import Controller, Settings

_SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def _children(o: Any) -> list[Any]:
    if isinstance(o, dict):
        return [*o.keys(), *o.values()]
    if isinstance(o, (list, tuple, set, frozenset)):
        return list(o)
    out = []
    d = getattr(o, "__dict__", None)
    if isinstance(d, dict):
        out.append(d)
    for cls in type(o).__mro__:
        for slot in getattr(cls, "__slots__", ()) or ():
            if slot not in ("__dict__", "__weakref__") and hasattr(o, slot):
                out.append(getattr(o, slot))
    return out


class Walk:
    """Deep sizes with every object counted once across all the walks."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.keep: list[Any] = []  # the walked roots stay alive: their ids stay theirs

    def size(self, root: Any) -> int:
        self.keep.append(root)
        total, stack = 0, [root]
        while stack:
            o = stack.pop()
            if id(o) in self.seen or isinstance(o, _SKIP):
                continue
            self.seen.add(id(o))
            total += sys.getsizeof(o)
            stack.extend(_children(o))
        return total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--nodes", type=int, default=5000)
    n = p.parse_args().nodes
    w = sim.CountingWriter()
    # Claim events on (draview run's default): the status bodies they read are kept.
    ctl = Controller(w, Settings(claim_events=True))
    sim.feed(ctl.ingest.node_event, world.all_nodes(n))
    sim.feed(ctl.ingest.slice_event, world.all_slices(n))
    sim.feed(ctl.ingest.claim_event, world.all_claims(n))
    ctl.ingest.listed()
    ctl.leader = True
    asyncio.new_event_loop().run_until_complete(ctl.worker.full_sync())
    gc.collect()
    rec = ctl.reconciler
    devices = sum(len(s.devices) for s in ctl.store.slices.values())
    claims, pools = len(ctl.store.claim_uids()), len(rec.results)
    lean = list(rec.results.values())
    prepared = [r.prepared for r in lean if r.prepared is not None]
    rows = [
        ("slices in the store (slotted, interned values)", ctl.store.slices, devices, "device"),
        ("judged pools: parses", [x.parsed for x in prepared], pools, "pool"),
        ("judged pools: node views", [x.views for x in prepared], pools, "pool"),
        ("judged pools: allocated state", [r.allocated for r in lean], pools, "pool"),
        ("judged pools: the rest of the prepared pool", prepared, pools, "pool"),
        ("judged pools: conditions, errors, counts", lean, pools, "pool"),
        ("status bodies kept for explanations (claim events on)", rec._packed, pools, "pool"),
        ("written objects (Writer.known)", w.known, pools, "pool"),
        (
            "claims (records, pool allocations)",
            (ctl.store.pending, ctl.store.claim_pools, ctl.store.pool_allocs, ctl.store.bare),
            claims,
            "claim",
        ),
        ("versions seen (every object)", ctl.ingest.versions, claims, "claim"),
        ("nodes (names, labels, groups)", ctl.nodes, n, "node"),
        ("everything else the controller holds", ctl, pools, "pool"),
    ]
    walk = Walk()
    print(f"{n} nodes, {pools} pools, {devices} devices, {claims} claims")
    print(f"{'WHAT':<48} {'MIB':>7}  PER UNIT")
    total = 0
    for what, root, count, unit in rows:
        b = walk.size(root)
        total += b
        print(f"{what:<48} {b / 2**20:7.1f}  {b / max(1, count):,.0f} B per {unit}")
    print(f"{'total':<48} {total / 2**20:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
