"""NodePool.holding: a node's pool with another allocated state, every other field as
it was (a field added to NodePool and not passed on fails here)."""

from __future__ import annotations

from dataclasses import fields

from draview.engine.verdict import AllocatedState
from draview.explain.gather import NodePool


def test_holding_passes_on_every_field_but_the_state() -> None:
    # A distinct object per field (none is checked here), to be passed on as it is.
    values = {
        f.name: AllocatedState() if f.name == "allocated" else f"value-{i}"
        for i, f in enumerate(fields(NodePool))
    }
    pool = NodePool(**values)
    state = AllocatedState()
    held = pool.holding(state)
    assert held.allocated is state and held is not pool
    for f in fields(NodePool):
        if f.name != "allocated":
            assert getattr(held, f.name) is getattr(pool, f.name), f.name
