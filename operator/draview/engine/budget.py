"""A byte budget per status object.

The API server rejects a request body over 1.5 MiB (etcd's limit), and one slice of 128
shareable devices with dozens of shares each and long claim names goes past it. An
object over budget lists fewer allocations per device (allocationCount stays exact and
`allocationsTruncated` says the list was cut), then, if still over, keeps the first
validation errors and ends the list with "... and K more". A device is never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

DEFAULT_MAX_OBJECT_BYTES = 1_000_000
# The one field the budget adds to a device status (api/status.py's DeviceStatus does not
# declare it yet; the CRD does).
TRUNCATED_FIELD = "allocationsTruncated"


def object_bytes(obj: Any) -> int:
    """Size of the object as JSON on the wire, encoded as kubernetes_asyncio encodes a
    request body (json.dumps with its defaults). Those escape every non-ASCII character,
    so the text's length is its size in bytes; and the status objects hold no cycles, so
    the encoder need not look for them (the same text, sooner)."""
    return len(json.dumps(obj, check_circular=False))


def surely_fits(compact_bytes: int, max_bytes: int) -> bool:
    """Whether an object whose compact JSON (no spaces, keys in any order) takes
    `compact_bytes` fits in `max_bytes` as object_bytes counts it, without encoding it
    again: the default separators add one space each, and a separator is always followed
    by at least one character, so the text is at most twice as long. Within that margin
    (a 1,000,000-byte budget and a pool's status of a few KB) nothing is measured twice."""
    return 2 * compact_bytes <= max_bytes


def fits(obj: Any, max_bytes: int) -> bool:
    """object_bytes(obj) <= max_bytes, measured exactly only near the budget: the compact
    text of pydantic-core is much cheaper than json.dumps's, and for ASCII text (its
    length then is object_bytes' count without the spaces) surely_fits decides. Text
    that is no UTF-8 (a lone surrogate, read from an input file's escape) is measured
    as json.dumps escapes it."""
    try:
        compact = to_json(obj)
    except PydanticSerializationError:
        compact = None
    if compact is not None and compact.isascii() and surely_fits(len(compact), max_bytes):
        return True
    return object_bytes(obj) <= max_bytes


def fit_object(obj: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """`obj` itself when it fits, else a copy whose status is shortened to fit (as far
    as dropping allocations and validation errors can; the devices all stay)."""
    if fits(obj, max_bytes):
        return obj
    status: dict[str, Any] = obj.get("status") or {}
    longest = max((len(d.get("allocations", ())) for d in status.get("devices", ())), default=0)

    def with_allocations(n: int) -> dict[str, Any]:
        return {**obj, "status": _cap_allocations(status, n)}

    n = _largest(longest, lambda n: object_bytes(with_allocations(n)) <= max_bytes)
    shorter = with_allocations(n)
    if object_bytes(shorter) <= max_bytes:
        return shorter
    cut: dict[str, Any] = shorter["status"]
    most = max(len(cut.get("validationErrors", ())), _pool_errors(cut))

    def with_errors(k: int) -> dict[str, Any]:
        return {**shorter, "status": _cap_errors(cut, k)}

    k = _largest(most, lambda k: object_bytes(with_errors(k)) <= max_bytes)
    return with_errors(k)


def _largest(high: int, fits: Callable[[int], bool]) -> int:
    """The largest n in [0, high] with fits(n), for a monotone `fits`; 0 if none."""
    low = 0
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _cap_allocations(status: dict[str, Any], n: int) -> dict[str, Any]:
    if "devices" not in status:
        return status
    devices = []
    for dev in status["devices"]:
        allocs = dev.get("allocations")
        if allocs is None or len(allocs) <= n:
            devices.append(dev)
            continue
        # allocationCount is set by the engine whenever allocations are listed.
        devices.append({**dev, "allocations": allocs[:n], TRUNCATED_FIELD: True})
    return {**status, "devices": devices}


def cap_errors(errors: list[str], k: int) -> list[str]:
    """The first k errors, then one entry that counts the rest."""
    if len(errors) <= k:
        return errors
    return [*errors[:k], f"... and {len(errors) - k} more"]


def _pool_errors(status: dict[str, Any]) -> int:
    return len((status.get("poolStatus") or {}).get("validationErrors", ()))


def _cap_errors(status: dict[str, Any], k: int) -> dict[str, Any]:
    out = dict(status)
    if "validationErrors" in out:
        out["validationErrors"] = cap_errors(out["validationErrors"], k)
    brief = out.get("poolStatus")
    if brief and "validationErrors" in brief:
        out["poolStatus"] = {**brief, "validationErrors": cap_errors(brief["validationErrors"], k)}
    return out
