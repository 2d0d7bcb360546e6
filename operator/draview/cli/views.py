"""Tables over ResourcePoolStatus / ResourceSliceStatus objects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from draview.cli.tables import render_table


def _cond(status: dict[str, Any], type_: str) -> str:
    for c in status.get("conditions") or status.get("poolStatus", {}).get("conditions", []):
        if c.get("type") == type_:
            return str(c.get("status"))
    return "Unknown"


def summary_counts(summary: dict[str, Any]) -> list[object]:
    return [
        summary.get("totalDevices", 0),
        summary.get("allocatedDevices", 0),
        summary.get("availableDevices", 0),
        summary.get("unavailableDevices", 0),
    ]


def pools_table(pools: Sequence[dict[str, Any]]) -> str:
    rows = []
    for o in pools:
        st = o.get("status", {})
        rows.append(
            [
                o["metadata"]["name"],
                o["spec"]["driver"],
                o["spec"]["pool"],
                o["spec"].get("nodeName", ""),
                *summary_counts(st.get("summary", {})),
                _cond(st, "Complete"),
                _cond(st, "Valid"),
            ]
        )
    head = [
        "NAME",
        "DRIVER",
        "POOL",
        "NODE",
        "TOTAL",
        "ALLOCATED",
        "AVAILABLE",
        "UNAVAILABLE",
        "COMPLETE",
        "VALID",
    ]
    return render_table(head, rows)


def slices_table(slices: Sequence[dict[str, Any]]) -> str:
    rows = []
    for o in slices:
        st = o.get("status", {})
        rows.append(
            [
                o["metadata"]["name"],
                o["spec"]["driver"],
                o["spec"]["pool"],
                o["spec"].get("nodeName", ""),
                *summary_counts(st.get("summary", {})),
            ]
        )
    head = ["SLICE", "DRIVER", "POOL", "NODE", "TOTAL", "ALLOCATED", "AVAILABLE", "UNAVAILABLE"]
    return render_table(head, rows)


def _claims(dev: dict[str, Any]) -> str:
    allocs = dev.get("allocations") or []
    names = [
        f"{a['claimNamespace']}/{a['claimName']}" + (" (admin)" if a.get("adminAccess") else "")
        for a in allocs
    ]
    more = int(dev.get("allocationCount", len(allocs))) - len(allocs)
    if more > 0:
        names.append(f"+{more} more")
    return ",".join(names)


def devices_table(slices: Sequence[dict[str, Any]]) -> str:
    rows = []
    for o in slices:
        for d in o.get("status", {}).get("devices", []):
            rows.append(
                [
                    o["spec"]["pool"],
                    o["metadata"]["name"],
                    d["name"],
                    d["state"],
                    d.get("stateReason", ""),
                    _claims(d),
                ]
            )
    return render_table(["POOL", "SLICE", "DEVICE", "STATE", "REASON", "CLAIMS"], rows)


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
