"""What the server holds of each of draview's objects, kept small.

The writer compares every judged object with what it last wrote (an unchanged world
writes nothing) and sends only the difference. Kept as dicts, those copies would be the
largest part of the operator's memory after the pools themselves (a MIG pool's status is
many KB of dicts). Kept here as compact JSON, compressed with a dictionary learnt from
the first objects written (packing.py): a small fraction of that, and an unchanged
object is recognised by comparing bytes, without building a dict.

The text is pydantic-core's encoding, cheaper than json.dumps (every judged object is
encoded). It keeps each dict's own key order, so the same judged object is always the
same bytes, but the server's copy (Go sorts map keys) may be spelled differently from
ours: `Writer.put` then compares the two as values and, when they are equal, keeps
ours, so a restart still writes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_json

from draview.controller.packing import Packer
from draview.engine.model import PoolKey

# One for every writer of the process: its dictionary learns what draview writes.
PACKER = Packer()


def owned_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The parts of an object outside status that draview decides."""
    meta = obj.get("metadata") or {}
    return {
        "metadata": {
            "labels": meta.get("labels") or {},
            "ownerReferences": meta.get("ownerReferences") or [],
        },
        "spec": obj.get("spec") or {},
    }


def canonical(obj: dict[str, Any]) -> bytes:
    """What the writer remembers of an object (what `put` compares, nothing more), as
    compact JSON in UTF-8, keys in the order the object holds them."""
    return to_json({**owned_fields(obj), "status": obj.get("status") or {}})


def left_out_bytes(obj: dict[str, Any]) -> int:
    """The compact JSON size of what canonical() leaves out (kind, apiVersion, name):
    with it, an upper bound of the whole object's compact size."""
    meta = obj.get("metadata") or {}
    rest = {k: v for k, v in obj.items() if k not in ("metadata", "spec", "status")}
    rest["metadata"] = {k: v for k, v in meta.items() if k not in ("labels", "ownerReferences")}
    return len(to_json(rest))


def pool_of(obj: dict[str, Any]) -> PoolKey | None:
    spec = obj.get("spec") or {}
    driver, pool = spec.get("driver"), spec.get("pool")
    return (driver, pool) if isinstance(driver, str) and isinstance(pool, str) else None


class Known:
    __slots__ = ("_blob", "pool", "version")

    def __init__(self, data: bytes, pool: PoolKey | None, version: str | None = None) -> None:
        self._blob = PACKER.pack(data)
        # The pool the object belongs to (None if the server's copy names none): which
        # objects a pool that failed to compute may still own.
        self.pool = pool
        # The resourceVersion the server gave it when we last wrote or listed it (None:
        # unknown). The next status is then a replace at that version, cheaper for the
        # API server than a merge patch; a 409 means someone else wrote since.
        self.version = version

    @classmethod
    def of(
        cls, obj: dict[str, Any], data: bytes | None = None, version: str | None = None
    ) -> Known:
        """`data`: the object's canonical() bytes, when the caller has them already."""
        return cls(canonical(obj) if data is None else data, pool_of(obj), version)

    def data(self) -> bytes:
        return PACKER.unpack(self._blob)

    def value(self) -> dict[str, Any]:
        """The remembered object: metadata (labels, ownerReferences), spec, status."""
        out: dict[str, Any] = json.loads(self.data())
        return out
