"""Run the engine on raw objects and pick results apart."""

from __future__ import annotations

from typing import Any

from builders import world

from draview.engine.model import EngineOptions
from draview.engine.pool import PoolResult
from draview.engine.world import compute_world


def results(*objects: dict[str, Any], **opts: Any) -> dict[tuple[str, str], PoolResult]:
    return {r.key: r for r in compute_world(world(*objects), EngineOptions(**opts))}


def pool(*objects: dict[str, Any], key: tuple[str, str] | None = None, **opts: Any) -> PoolResult:
    res = results(*objects, **opts)
    if key is None:
        assert len(res) == 1, sorted(res)
        return next(iter(res.values()))
    return res[key]


def states(r: PoolResult, slice_name: str | None = None) -> dict[str, tuple[str, str | None]]:
    """Device states by name; with several slices naming one device, the last slice wins,
    so pass `slice_name` where that matters."""
    out = {}
    for sr in r.slices:
        if slice_name is not None and sr.slice.name != slice_name:
            continue
        for d in sr.status["devices"]:
            out[d["name"]] = (d["state"], d.get("stateReason"))
    return out


def prefixes(r: PoolResult) -> list[str]:
    return [e.split(":", 1)[0] for e in r.errors.all()]
