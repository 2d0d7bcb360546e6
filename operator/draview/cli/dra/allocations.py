"""Allocations as the operator recorded them, in place of every ResourceClaim.

Each device in a ResourceSliceStatus lists the allocations the engine counted for it
(claim, uid, request, share, consumed capacity, admin access): the very references the
engine builds from claims (engine/allocations.py), so claims rebuilt from them judge a
pool exactly as the claims themselves do, as of the operator's last write. Reading a
status object per slice instead of a claim per pod is what lets `why` answer in seconds
on a cluster of 50,000 claims. Where a device's list was cut short (more allocations
than a status lists), where a pool holds an allocation of a device it does not have
(which no device's status can record), or where some slice read has no status object
of its own (the operator is behind, or no longer runs), the statuses cannot stand in and
every claim is read instead.
"""

from __future__ import annotations

from typing import Any

# Where the allocations a `why` answer counted came from.
OPERATOR = "the draview operator's ResourceSliceStatus objects"
CLAIMS = "ResourceClaims"


def statuses_cover(statuses: list[dict[str, Any]], slices: list[dict[str, Any]]) -> bool:
    """Whether every slice has its status object: named after it and, where the slice
    has a uid, owned by that very slice (not by one deleted and made again since)."""
    owned: set[tuple[str, str]] = set()
    for obj in statuses:
        meta = obj.get("metadata") or {}
        owners = meta.get("ownerReferences") or [{}]
        owned.update((str(meta.get("name")), str(o.get("uid") or "")) for o in owners)
    for s in slices:
        meta = s.get("metadata") or {}
        if (str(meta.get("name")), str(meta.get("uid") or "")) not in owned:
            return False
    return True


def claims_from_statuses(
    statuses: list[dict[str, Any]], claim: dict[str, Any] | None = None
) -> list[dict[str, Any]] | None:
    """ResourceClaim-shaped objects holding the allocations the statuses record, with
    `claim` itself as the API server has it (newer than any status); None when some
    device's allocations were cut short."""
    meta = (claim or {}).get("metadata") or {}
    own = (meta.get("namespace") or "", meta.get("name") or "")
    results: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for obj in statuses:
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        if _unrecorded(status):
            return None
        for dev in status.get("devices") or []:
            allocs = dev.get("allocations") or []
            if int(dev.get("allocationCount", len(allocs))) > len(allocs):
                return None
            for a in allocs:
                key = (a["claimNamespace"], a["claimName"], a.get("claimUID") or "")
                if key[:2] == own:
                    continue
                result: dict[str, Any] = {
                    "request": a.get("request") or "",
                    "driver": spec["driver"],
                    "pool": spec["pool"],
                    "device": dev["name"],
                }
                if a.get("adminAccess"):
                    result["adminAccess"] = True
                if a.get("shareID"):
                    result["shareID"] = a["shareID"]
                if a.get("capacity"):
                    result["consumedCapacity"] = dict(a["capacity"])
                found = results.setdefault(key, [])
                # Slices of two generations of a pool may both list a device and its
                # allocation: the claim holds it once.
                if result not in found:
                    found.append(result)
    out = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"namespace": ns, "name": name, "uid": uid},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": found}}},
        }
        for (ns, name, uid), found in results.items()
    ]
    if claim is not None:
        out.append(claim)
    return out


def _unrecorded(status: dict[str, Any]) -> bool:
    """Whether the pool holds allocations no device status records: one of a device the
    pool does not have (engine/pool.py names it DanglingAllocation), or errors cut short
    that might hide one."""
    errors = [
        *(status.get("validationErrors") or []),
        *((status.get("poolStatus") or {}).get("validationErrors") or []),
    ]
    return any(str(e).startswith(("DanglingAllocation:", "... and ")) for e in errors)
