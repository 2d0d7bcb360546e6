"""Build raw Kubernetes objects for tests, as an API server would return them."""

from __future__ import annotations

import random
from typing import Any

from draview.api.world import World, build_world
from draview.engine.model import EngineOptions
from draview.engine.pool import PoolResult
from draview.engine.world import compute_world

DRIVER = "gpu.example.com"


def device(
    name: str,
    *,
    counters: dict[str, dict[str, str]] | None = None,
    capacity: dict[str, Any] | None = None,
    shareable: bool = False,
    taints: list[dict[str, str]] | None = None,
    **attrs: Any,
) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if attrs:
        d["attributes"] = {
            k: ({"int": v} if isinstance(v, int) else {"string": v}) for k, v in attrs.items()
        }
    if capacity:
        d["capacity"] = {k: v if isinstance(v, dict) else {"value": v} for k, v in capacity.items()}
    if counters:
        d["consumesCounters"] = [
            {"counterSet": cs, "counters": {c: {"value": q} for c, q in cnt.items()}}
            for cs, cnt in counters.items()
        ]
    if shareable:
        d["allowMultipleAllocations"] = True
    if taints:
        d["taints"] = taints
    return d


def rslice(
    name: str,
    devices: list[dict[str, Any]] | None = None,
    *,
    pool: str = "pool-a",
    driver: str = DRIVER,
    generation: int = 1,
    count: int = 1,
    node: str | None = "node-a",
    counter_sets: dict[str, dict[str, str]] | None = None,
    api_version: str = "resource.k8s.io/v1",
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        **spec,
    }
    if node:
        body["nodeName"] = node
    elif not {"allNodes", "nodeSelector", "perDeviceNodeSelection"} & set(spec):
        body["allNodes"] = True
    if devices is not None:
        body["devices"] = devices
    if counter_sets:
        body["sharedCounters"] = [
            {"name": n, "counters": {c: {"value": q} for c, q in cnt.items()}}
            for n, cnt in counter_sets.items()
        ]
    return {
        "apiVersion": api_version,
        "kind": "ResourceSlice",
        "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
        "spec": body,
    }


def counter_pool(
    name: str,
    devices: list[dict[str, Any]],
    counter_sets: dict[str, dict[str, str]],
    *,
    count: int = 1,
    **kw: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A slice of devices and, apart, the slice of the counter sets they consume: the
    layout from 1.35, where a slice holds one or the other (`count`: the pool's other
    slices; the two count themselves)."""
    counters = rslice(f"{name}-counters", None, count=count + 1, counter_sets=counter_sets, **kw)
    return counters, rslice(name, devices, count=count + 1, **kw)


def result(
    dev: str,
    *,
    pool: str = "pool-a",
    driver: str = DRIVER,
    request: str = "gpu",
    admin: bool = False,
    share: str | None = None,
    consumed: dict[str, str] | None = None,
) -> dict[str, Any]:
    r: dict[str, Any] = {"request": request, "driver": driver, "pool": pool, "device": dev}
    if admin:
        r["adminAccess"] = True
    if share:
        r["shareID"] = share
    if consumed:
        r["consumedCapacity"] = consumed
    return r


def claim(name: str, *results: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
            }
        },
    }
    if results:
        obj["status"] = {"allocation": {"devices": {"results": list(results)}}}
    return obj


def device_class(name: str = DRIVER, driver: str = DRIVER) -> dict[str, Any]:
    """A DeviceClass selecting every device of `driver`."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
    }


def taint_rule(name: str, effect: str = "NoSchedule", **selector: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": selector,
            "taint": {"key": "example.com/broken", "value": "yes", "effect": effect},
        },
    }


def random_counter_pool(rng: random.Random) -> list[dict[str, Any]]:
    """One node's pool: devices debiting one of a few counter sets, some shareable with
    capacity, some tainted; its counters in their own slice."""
    sets = {
        f"gpu-{s}": {"mem": f"{rng.randint(2, 6)}Gi", "sm": str(rng.randint(2, 5))}
        for s in range(rng.randint(1, 3))
    }
    devices = []
    for n in range(rng.randint(3, 12)):
        cs = rng.choice(sorted(sets))
        kw: dict[str, Any] = {}
        if rng.random() < 0.8:
            kw["counters"] = {cs: {"mem": f"{rng.randint(1, 3)}Gi", "sm": str(rng.randint(1, 2))}}
        if rng.random() < 0.25:
            kw["shareable"] = True
            kw["capacity"] = {"bw": "10"}
        if rng.random() < 0.1:
            kw["taints"] = [{"key": "broken", "value": "y", "effect": "NoSchedule"}]
        devices.append(device(f"dev-{n}", **kw))
    if rng.random() < 0.3:
        # Each device names its node, but one names none: the view never hands it
        # out, and its status still lists whoever holds it.
        for d in devices[1:]:
            d["nodeName"] = "node-a"
        return list(
            counter_pool("p", devices, sets, pool="p", node=None, perDeviceNodeSelection=True)
        )
    return list(counter_pool("p", devices, sets, pool="p", node="node-a"))


def world(*objects: dict[str, Any]) -> World:
    return build_world(objects)


def judged_counter_pool(
    rng: random.Random, opts: EngineOptions, *objects: dict[str, Any]
) -> tuple[World, PoolResult, list[str], set[str]]:
    """random_counter_pool judged in a world with `objects`: the world, the pool's
    result, its current devices' names, and those of them that are shareable."""
    w = world(*objects, *random_counter_pool(rng))
    r = compute_world(w, opts)[0]
    assert r.prepared is not None
    devices = [d for fs in r.prepared.current for d in fs.devices]
    return (
        w,
        r,
        [d.name for d in devices],
        {d.name for d in devices if d.allow_multiple_allocations},
    )
