"""Tables over ResourcePoolStatus / ResourceSliceStatus objects."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from draview.cli.dra.rbac import Visibility
from draview.cli.tables import render_table

Row = list[object]
ClaimsText = Callable[[dict[str, Any]], str]


def _cond(status: dict[str, Any], type_: str) -> str:
    conds = status.get("conditions") or status.get("poolStatus", {}).get("conditions", [])
    return next((str(c.get("status")) for c in conds if c.get("type") == type_), "Unknown")


def summary_counts(summary: dict[str, Any]) -> list[object]:
    return [
        summary.get("totalDevices", 0),
        summary.get("allocatedDevices", 0),
        summary.get("availableDevices", 0),
        summary.get("unavailableDevices", 0),
    ]


# The one rendering of pools, slices and devices: `draview analyze -o table|wide` and
# `kubectl dra get` show the same columns.
POOL_HEAD = ["DRIVER", "POOL", "NODE", "TOTAL", "ALLOCATED", "AVAILABLE", "UNAVAILABLE"]
POOL_HEAD += ["COMPLETE", "VALID"]
POOL_WIDE = ["PARTIAL", "GENERATION", "SLICES", "ERRORS"]
SLICE_HEAD = ["NAME", "DRIVER", "POOL", "NODE", "TOTAL", "ALLOCATED", "AVAILABLE", "UNAVAILABLE"]
SLICE_WIDE = ["PARTIAL", "GENERATION"]
DEVICE_HEAD = ["DRIVER", "POOL", "NODE", "DEVICE", "STATE", "REASON", "CLAIMS"]
DEVICE_WIDE = ["SLICE", "CAPACITY", "AVAILABLE-CAPACITY"]


def pool_row(o: dict[str, Any], wide: bool) -> Row:
    status = o.get("status") or {}
    summary = status.get("summary") or {}
    row: Row = [
        o["spec"]["driver"],
        o["spec"]["pool"],
        o["spec"].get("nodeName", ""),
        *summary_counts(summary),
        _cond(status, "Complete"),
        _cond(status, "Valid"),
    ]
    if wide:
        row += [
            summary.get("partiallyAllocatedDevices", 0),
            status.get("generation", 0),
            f"{status.get('observedSliceCount', 0)}/{status.get('expectedSliceCount', 0)}",
            len(status.get("validationErrors") or []),
        ]
    return row


def slice_row(o: dict[str, Any], wide: bool) -> Row:
    status = o.get("status") or {}
    summary = status.get("summary") or {}
    row: Row = [
        o["metadata"]["name"],
        o["spec"]["driver"],
        o["spec"]["pool"],
        o["spec"].get("nodeName", ""),
        *summary_counts(summary),
    ]
    if wide:
        row += [summary.get("partiallyAllocatedDevices", 0), status.get("observedGeneration")]
    return row


def _caps(caps: dict[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((caps or {}).items()))


def device_row(o: dict[str, Any], d: dict[str, Any], claims: ClaimsText, wide: bool) -> Row:
    row: Row = [
        o["spec"]["driver"],
        o["spec"]["pool"],
        o["spec"].get("nodeName", ""),
        d["name"],
        d["state"],
        d.get("stateReason", ""),
        claims(d),
    ]
    if wide:
        row += [o["metadata"]["name"], _caps(d.get("capacity")), _caps(d.get("availableCapacity"))]
    return row


def pools_table(pools: Sequence[dict[str, Any]], wide: bool = False) -> str:
    head = POOL_HEAD + (POOL_WIDE if wide else [])
    return render_table(head, [pool_row(o, wide) for o in pools])


def slices_table(slices: Sequence[dict[str, Any]], wide: bool = False) -> str:
    head = SLICE_HEAD + (SLICE_WIDE if wide else [])
    return render_table(head, [slice_row(o, wide) for o in slices])


def devices_table(slices: Sequence[dict[str, Any]], wide: bool = False) -> str:
    rows = [
        device_row(o, d, Visibility(None).claims_text, wide)  # offline: every claim shown
        for o in slices
        for d in (o.get("status") or {}).get("devices") or []
    ]
    return render_table(DEVICE_HEAD + (DEVICE_WIDE if wide else []), rows)


def partitions_table(pools: Sequence[dict[str, Any]]) -> str:
    rows = []
    for o in pools:
        for p in o.get("status", {}).get("partitions", []):
            rows.append(
                [
                    o["spec"]["pool"],
                    p["attribute"],
                    p["type"],
                    p["total"],
                    p["available"],
                    p["allocatable"],
                    p["method"],
                ]
            )
    if not rows:
        return ""
    head = ["POOL", "ATTRIBUTE", "TYPE", "TOTAL", "AVAILABLE", "FIT-TOGETHER", "METHOD"]
    return render_table(head, rows)


def counters_table(pools: Sequence[dict[str, Any]]) -> str:
    rows = []
    for o in pools:
        for cs in o.get("status", {}).get("counterSets", []):
            for name, c in cs["counters"].items():
                rows.append(
                    [o["spec"]["pool"], cs["name"], name, c["consumed"], c["total"], c["available"]]
                )
    if not rows:
        return ""
    return render_table(["POOL", "COUNTER-SET", "COUNTER", "CONSUMED", "TOTAL", "AVAILABLE"], rows)
