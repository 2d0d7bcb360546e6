"""Generated worlds as a Kubernetes 1.34 API server would hold them.

worldgen.py writes 1.35+ pools: counter sets in slices of their own, consumed by the
devices of other slices of the pool. 1.34 keeps sharedCounters beside devices in one
slice and its validation lets a device consume only the counter sets of its own slice
(k8s.io/api v0.34 resource/v1 ResourceSliceSpec; at most 32 counters per slice). So
each device slice gets a copy of the counter sets its devices consume (each slice then
counts its own: that is 1.34's allocator), consumption of a set or counter the pool
never defines is dropped (1.34 would refuse the slice), and so are counter sets over
the 32-counter limit together with what their devices consume of them.

Taints with effect None (added in 1.35) are dropped, and DeviceTaintRules with it; the
others are written as resource.k8s.io/v1alpha3, the one version 1.34 serves them in.

Pools made invalid by duplicate device names stay as generated: 1.34's allocator aborts
the whole scheduling attempt when its walk meets one, whichever pool the claim asks for
(engine/aborts.py).
"""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]
MAX_SHARED_COUNTERS = 32  # ResourceSliceMaxSharedCounters in k8s.io/api v0.34


def as_134(objects: list[Obj]) -> list[Obj]:
    out = [o for o in copy.deepcopy(objects) if not _none_rule(o)]
    for rule in (o for o in out if o.get("kind") == "DeviceTaintRule"):
        rule["apiVersion"] = "resource.k8s.io/v1alpha3"
    slices = [o for o in out if o.get("kind") == "ResourceSlice"]
    for s in slices:
        for dev in s["spec"].get("devices") or ():
            taints = [t for t in dev.get("taints") or () if t.get("effect") != "None"]
            if taints:
                dev["taints"] = taints
            else:
                dev.pop("taints", None)
    groups: dict[tuple[str, str, int], list[Obj]] = {}
    for s in slices:
        pool = s["spec"]["pool"]
        key = (s["spec"]["driver"], pool["name"], pool.get("generation", 0))
        groups.setdefault(key, []).append(s)
    for group in groups.values():
        defined: dict[str, Obj] = {}
        for s in group:
            for cs in s["spec"].get("sharedCounters") or ():
                defined.setdefault(cs["name"], cs)
        for s in group:
            devices = s["spec"].get("devices") or []
            if devices:
                _own_counters(s["spec"], devices, defined)
    return out


def _own_counters(spec: Obj, devices: list[Obj], defined: dict[str, Obj]) -> None:
    own = {cs["name"]: cs for cs in spec.get("sharedCounters") or ()}
    room = MAX_SHARED_COUNTERS - sum(len(cs["counters"]) for cs in own.values())
    for dev in devices:
        kept = []
        for cc in dev.get("consumesCounters") or ():
            name = cc["counterSet"]
            if name not in own and name in defined and len(defined[name]["counters"]) <= room:
                own[name] = copy.deepcopy(defined[name])
                room -= len(own[name]["counters"])
            if name not in own:
                continue
            counters = {c: q for c, q in cc["counters"].items() if c in own[name]["counters"]}
            if counters:
                kept.append({**cc, "counters": counters})
        if kept:
            dev["consumesCounters"] = kept
        else:
            dev.pop("consumesCounters", None)
    if own:
        spec["sharedCounters"] = list(own.values())


def _none_rule(obj: Obj) -> bool:
    return obj.get("kind") == "DeviceTaintRule" and obj["spec"]["taint"].get("effect") == "None"
