"""Fields newer than 1.36's API, or behind gates that are off by default, added to a
generated world: binding conditions (bindingConditions, bindingFailureConditions,
bindsToNode), fractional capacity ranges (DRAFractionalCapacityRange, 1.37),
compatibility groups (DRADeviceCompatibilityGroups, 1.37) and optional node operations
(skipNodeOperations on slices, DRAOptionalNodeOperations in a Node's
status.declaredFeatures; 1.37).

Drawn from a random stream of their own (seeded from the world's seed), after the rest
of the world: the objects worldgen.py draws are unchanged apart from the fields added
here, so a seed keeps naming the same world. What each profile's API server keeps of
these fields is served.py's business.
"""

from __future__ import annotations

import random
from typing import Any

Obj = dict[str, Any]
BINDING = "example.com/attached"
BINDING_FAILED = "example.com/attach-failed"
CORES = "cores"
GROUPS = ("even", "odd", "any")  # compatibility group names
NAMESPACE = "team-gated"
# skipNodeOperations the API accepts (NodePrepareResources only with the unprepare call).
SKIPS = (["*"], ["NodeUnprepareResources"], ["NodePrepareResources", "NodeUnprepareResources"])
# Fractional ranges every release's validation accepts: a step below one whole unit
# reads as 1 on the integer path, so only the milli path (1.37) has anything to check.
_RANGES = (("250m", "250m"), ("500m", "250m"), ("100m", "100m"), ("250m", "125m"))


def add_gated(seed: int, objects: list[Obj], pending: list[Obj]) -> set[str]:
    """Add the fields to `objects` and claims to `pending` in place (with the classes and
    the namespace those claims name); the features drawn."""
    rng = random.Random(f"{seed}/gated")
    before = len(objects) + len(pending)
    slices = [o for o in objects if o.get("kind") == "ResourceSlice"]
    devices = [(s, d) for s in slices for d in s["spec"].get("devices") or ()]
    features: set[str] = set()
    if devices and rng.random() < 0.3:
        _binding(rng, devices, features)
    shareable = [(s, d) for s, d in devices if d.get("allowMultipleAllocations")]
    if shareable and rng.random() < 0.4:
        _fractional(rng, shareable, objects, pending, features)
    consumers = [(s, d) for s, d in devices if d.get("consumesCounters")]
    if consumers and rng.random() < 0.35:
        _groups(rng, consumers, pending, features)
    if slices and rng.random() < 0.2:
        _node_operations(rng, slices, objects, features)
    if len(objects) + len(pending) > before:
        _add_missing_parts(objects, pending)
    return features


def _add_missing_parts(objects: list[Obj], pending: list[Obj]) -> None:
    """The namespace and the device classes the added claims name, where still missing."""
    have = {(o["kind"], o["metadata"]["name"]) for o in objects}
    if ("Namespace", NAMESPACE) not in have:
        objects.insert(
            0, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
    for claim in [*objects, *pending]:
        if claim.get("kind") != "ResourceClaim" or claim["metadata"]["namespace"] != NAMESPACE:
            continue
        for request in claim["spec"]["devices"]["requests"]:
            name = request["exactly"]["deviceClassName"]
            if ("DeviceClass", name) not in have:
                have.add(("DeviceClass", name))
                objects.append(
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "DeviceClass",
                        "metadata": {"name": name},
                        "spec": {},
                    }
                )


def _binding(rng: random.Random, devices: list[tuple[Obj, Obj]], features: set[str]) -> None:
    for _, dev in rng.sample(devices, min(len(devices), rng.randint(1, 3))):
        if rng.random() < 0.8:
            dev["bindingConditions"] = [BINDING]
            dev["bindingFailureConditions"] = [BINDING_FAILED]
            features.add("binding-conditions")
        if rng.random() < 0.4:
            dev["bindsToNode"] = True
            features.add("binds-to-node")


def _fractional(
    rng: random.Random,
    shareable: list[tuple[Obj, Obj]],
    objects: list[Obj],
    pending: list[Obj],
    features: set[str],
) -> None:
    """A capacity in cores with a fractional range, some shares of it in use and a pending
    claim asking for an amount the two ways of rounding treat differently."""
    slc, dev = rng.choice(shareable)
    caps = dev.setdefault("capacity", {})
    if len(caps) + len(dev.get("attributes") or {}) >= 28:
        return
    low, step = rng.choice(_RANGES)
    total = rng.choice(("1", "2", "4"))
    policy: Obj = {"default": low, "validRange": {"min": low, "step": step}}
    caps[CORES] = {"value": total, "requestPolicy": policy}
    features.add("fractional-range")
    milli_total, milli_step = int(total) * 1000, _milli(step)
    taken = 0
    for k in range(rng.randint(0, 3)):
        amount = _milli(low) + milli_step * rng.randint(0, 3)
        if taken + amount > milli_total:
            break
        taken += amount
        objects.append(_share(slc, dev, f"cores-{k}", _quantity(amount), rng))
    ask = rng.choice(("", "300m", "1", "1100m", _quantity(milli_total - taken)))
    requests = {CORES: ask} if ask else {}
    pending.append(_claim(slc, "cores", rng, {"requests": requests} if requests else None))
    features.add("pending-fractional")


def _node_operations(
    rng: random.Random, slices: list[Obj], objects: list[Obj], features: set[str]
) -> None:
    """Slices whose devices need no node-local calls, and nodes that can tell (every node
    gets a status then: one without declares nothing, as the scheduler reads it)."""
    for slc in rng.sample(slices, min(len(slices), rng.randint(1, 2))):
        slc["spec"]["skipNodeOperations"] = rng.choice(SKIPS)
    for node in (o for o in objects if o.get("kind") == "Node"):
        declared = ["DRAOptionalNodeOperations"] if rng.random() < 0.5 else []
        node["status"] = {"declaredFeatures": declared} if declared else {}
    features.add("skip-node-operations")


def _milli(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(text) * 1000


def _quantity(milli: int) -> str:
    """Canonical, as the API server writes it back ("1", not "1000m")."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _groups(
    rng: random.Random, consumers: list[tuple[Obj, Obj]], pending: list[Obj], features: set[str]
) -> None:
    """Compatibility groups on counter consumptions (at most two names each, or none), and
    a claim for two devices of a pool that draws on them."""
    pools = sorted({(s["spec"]["driver"], s["spec"]["pool"]["name"]) for s, _ in consumers})
    driver, pool = rng.choice(pools)
    for s, dev in consumers:
        if (s["spec"]["driver"], s["spec"]["pool"]["name"]) != (driver, pool):
            continue
        for consumption in dev["consumesCounters"]:
            roll = rng.random()
            if roll < 0.75:
                consumption["compatibilityGroups"] = sorted(rng.sample(GROUPS, rng.randint(1, 2)))
    features.add("compatibility-groups")
    slc = next(s for s, _ in consumers if s["spec"]["driver"] == driver)
    pending.append(_claim(slc, "grouped", rng, None, count=2))


def _share(slc: Obj, dev: Obj, base: str, amount: str, rng: random.Random) -> Obj:
    spec = slc["spec"]
    result = {
        "request": "cpu",
        "driver": spec["driver"],
        "pool": spec["pool"]["name"],
        "device": dev["name"],
        "shareID": _uuid(rng),
        "consumedCapacity": {CORES: amount},
    }
    claim = _claim(slc, base, rng, {"requests": {CORES: amount}})
    claim["status"] = {"allocation": {"devices": {"results": [result]}}}
    return claim


def _claim(slc: Obj, base: str, rng: random.Random, capacity: Obj | None, count: int = 1) -> Obj:
    driver = slc["spec"]["driver"]
    exactly: Obj = {
        "deviceClassName": f"{driver.split('.')[0]}.example.com",
        "allocationMode": "ExactCount",
        "count": count,
        "selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}],
    }
    if capacity is not None:
        exactly["capacity"] = capacity
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"gated-{base}", "namespace": NAMESPACE, "uid": _uuid(rng)},
        "spec": {"devices": {"requests": [{"name": "cpu", "exactly": exactly}]}},
    }


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"
