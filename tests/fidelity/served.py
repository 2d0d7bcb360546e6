"""A generated world as the API server of a profile holds it.

An API server drops the fields of a disabled gate when an object is created
(dropDisabledFields in pkg/registry/resource/resourceslice/strategy.go of each release),
refuses some objects outright, and knows no field of a later release. So each profile is
asked about the world its own cluster could hold: list-typed and derived attributes,
capacity requests and the claims their cluster refuses as apiserver.py says; binding
conditions only with DRADeviceBindingConditions and DRAResourceClaimDeviceStatus,
compatibility groups only on 1.37 with DRADeviceCompatibilityGroups, skipNodeOperations
only on 1.37 with DRAOptionalNodeOperations; 1.34's layout (worlds134.py). The
allocator's answer for the gated fields a cluster cannot hold (what the scheduler would
do if handed them) is checked apart, with `keep_gated`.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from tests.fidelity.apiserver import held
from tests.fidelity.worldgen import World

from draview.engine.profile import Profile

Obj = dict[str, Any]
_BINDING = ("bindingConditions", "bindingFailureConditions", "bindsToNode")


def served_world(world: World, profile: Profile, keep_gated: bool = False) -> World:
    """The world, its objects and pending claims, as the profile's API server holds them."""
    objects, pending = held(world.objects, world.pending, profile)
    return replace(world, objects=_gated(objects, profile, keep_gated), pending=pending)


def _gated(out: list[Obj], profile: Profile, keep_gated: bool) -> list[Obj]:
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
