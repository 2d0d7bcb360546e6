"""A generated world as the API server of a profile holds it.

An API server drops the fields of a disabled gate when an object is created
(dropDisabledFields in pkg/registry/resource/resourceslice/strategy.go of each release),
and knows no field of a later release. So each profile is asked about the world its own
cluster could hold: binding conditions only with DRADeviceBindingConditions and
DRAResourceClaimDeviceStatus, compatibility groups only on 1.37 with
DRADeviceCompatibilityGroups, skipNodeOperations only on 1.37 with
DRAOptionalNodeOperations, and 1.34's layout (worlds134.py). The allocator's answer
for fields a cluster cannot hold (what the scheduler would do if handed them) is checked
apart, with `keep_gated`.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from tests.fidelity.worldgen import World
from tests.fidelity.worlds134 import as_134

from draview.engine.profile import Profile

Obj = dict[str, Any]
_BINDING = ("bindingConditions", "bindingFailureConditions", "bindsToNode")


def as_served(objects: list[Obj], profile: Profile, keep_gated: bool = False) -> list[Obj]:
    out = as_134(objects) if profile.release == "1.34" else objects
    if keep_gated:
        return out
    binding = profile.gate("DRADeviceBindingConditions") and profile.gate(
        "DRAResourceClaimDeviceStatus"
    )
    groups = profile.release == "1.37" and profile.gate("DRADeviceCompatibilityGroups")
    skips = profile.release == "1.37" and profile.gate("DRAOptionalNodeOperations")
    if binding and groups and skips:
        return out
    if not any(_has_dropped(o, binding, groups, skips) for o in out):
        return out
    out = copy.deepcopy(out)
    for obj in out:
        if obj.get("kind") != "ResourceSlice":
            continue
        if not skips:
            obj["spec"].pop("skipNodeOperations", None)
        for dev in obj["spec"].get("devices") or ():
            if not binding:
                for key in _BINDING:
                    dev.pop(key, None)
            if not groups:
                for consumption in dev.get("consumesCounters") or ():
                    consumption.pop("compatibilityGroups", None)
    return out


def _has_dropped(obj: Obj, binding: bool, groups: bool, skips: bool) -> bool:
    if obj.get("kind") != "ResourceSlice":
        return False
    if not skips and "skipNodeOperations" in obj["spec"]:
        return True
    for dev in obj["spec"].get("devices") or ():
        if not binding and any(key in dev for key in _BINDING):
            return True
        if not groups and any(
            "compatibilityGroups" in c for c in dev.get("consumesCounters") or ()
        ):
            return True
    return False


def served_world(world: World, profile: Profile) -> World:
    """The world with its objects as the profile's API server holds them."""
    return replace(world, objects=as_served(world.objects, profile))
