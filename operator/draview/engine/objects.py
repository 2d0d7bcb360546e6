"""The Kubernetes objects draview writes: ResourceSliceStatus and ResourcePoolStatus."""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any

from draview.api.status import (
    API_GROUP,
    API_VERSION,
    POOL_STATUS_KIND,
    SLICE_STATUS_KIND,
    PoolStatusSpec,
    SliceStatusSpec,
)
from draview.engine.budget import DEFAULT_MAX_OBJECT_BYTES, fit_object
from draview.engine.pool import PoolResult, SliceResult

LABEL_DRIVER = f"{API_GROUP}/driver"
LABEL_NODE = f"{API_GROUP}/node"
LABEL_POOL_HASH = f"{API_GROUP}/pool-hash"
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_SAFE = re.compile(r"[^a-z0-9.-]+")
_DASHES = re.compile(r"-{2,}")
MAX_NAME = 253


# Both are asked several times per pool in one judgement (the full sync's order, the
# previous conditions, the pool's objects and each slice's labels): a hash each time
# would be paid several times over for every pool judged. Bounded: pools are judged
# in order, so the repeats of one pool come close together.
@lru_cache(maxsize=8192)
def pool_hash(driver: str, pool: str) -> str:
    return hashlib.sha256(f"{driver}/{pool}".encode()).hexdigest()[:10]


@lru_cache(maxsize=8192)
def pool_object_name(driver: str, pool: str) -> str:
    """`<driver>-<pool>-<hash>`, DNS-safe. The hash is always there: driver and pool may
    both contain dashes, so `a-b` + `c` and `a` + `b-c` would otherwise collide."""
    name = _NAME_SAFE.sub("-", f"{driver}-{pool}".lower()).strip("-.")
    name = _DASHES.sub("-", name)
    suffix = pool_hash(driver, pool)[:8]
    return f"{name[: MAX_NAME - len(suffix) - 1].rstrip('-.')}-{suffix}"


def _labels(driver: str, node: str | None, pool: str) -> dict[str, str]:
    labels = {LABEL_POOL_HASH: pool_hash(driver, pool)}
    if len(driver) <= 63 and _LABEL_VALUE.match(driver):
        labels[LABEL_DRIVER] = driver
    if node and len(node) <= 63 and _LABEL_VALUE.match(node):
        labels[LABEL_NODE] = node
    return labels


def slice_status_object(result: PoolResult, sr: SliceResult) -> dict[str, Any]:
    s = sr.slice
    spec: SliceStatusSpec = {"driver": s.driver, "pool": s.pool.name, "resourceSliceName": s.name}
    if s.node_name:
        spec["nodeName"] = s.node_name
    meta: dict[str, Any] = {"name": s.name, "labels": _labels(s.driver, s.node_name, s.pool.name)}
    if s.uid:
        # Kubernetes deletes the status object together with its slice.
        meta["ownerReferences"] = [
            {
                "apiVersion": s.api_version,
                "kind": "ResourceSlice",
                "name": s.name,
                "uid": s.uid,
            }
        ]
    return {
        "apiVersion": API_VERSION,
        "kind": SLICE_STATUS_KIND,
        "metadata": meta,
        "spec": spec,
        "status": sr.status,
    }


def pool_status_object(result: PoolResult) -> dict[str, Any]:
    driver, pool = result.key
    spec: PoolStatusSpec = {"driver": driver, "pool": pool}
    if result.node_name:
        spec["nodeName"] = result.node_name
    return {
        "apiVersion": API_VERSION,
        "kind": POOL_STATUS_KIND,
        "metadata": {
            "name": pool_object_name(driver, pool),
            "labels": _labels(driver, result.node_name, pool),
        },
        "spec": spec,
        "status": result.status,
    }


def result_objects(
    result: PoolResult, max_bytes: int | None = DEFAULT_MAX_OBJECT_BYTES
) -> list[dict[str, Any]]:
    """The pool's objects: its ResourcePoolStatus first, then one per slice by name, each
    within `max_bytes` (budget.py; None: as judged, for a caller that fits them itself,
    as the operator's writer does where it encodes them anyway)."""
    out = [pool_status_object(result)]
    out.extend(slice_status_object(result, sr) for sr in sorted(result.slices, key=_by_name))
    if max_bytes is None:
        return out
    return [fit_object(o, max_bytes) for o in out]


def _by_name(sr: SliceResult) -> str:
    return sr.slice.name
