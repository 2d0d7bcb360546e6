"""A large DRA cluster, made one node at a time, as the list and watch calls deliver it.

Every node is a function of its index, so the simulation never holds the world: it asks
for node i's Node, slices and claims when it feeds them, and for one of its claims again
when it changes it. The mix (per 20 nodes):

- 14 whole-GPU nodes: 8 H100s, exclusive; 7 allocated, 1 free;
- 3 MIG nodes: 8 A100s, each publishing the whole GPU, four 1g.10gb and two 3g.20gb
  placements that draw on the GPU's counter set (a counter slice and a device slice);
  every GPU holds one of four layouts (whole, 4 x 1g, 2 x 3g, 2 x 1g + 1 x 3g) or
  nothing;
- 3 shareable nodes: 8 inference accelerators with allowMultipleAllocations and 80Gi of
  consumable memory (requests of 10Gi by default, 1Gi to 80Gi); 18 shares of 10Gi-20Gi;

and one NIC pool per rack of 64 nodes, reaching them by a node selector on the rack
label. About 1 % of the claims are pending (no allocation). At 65,000 nodes: 1.05 million
devices, about 650,000 claims.
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from generate import GPU_COUNTERS, PLACEMENTS, Placement

RACK_KEY = "topology.example.com/rack"
NODES_PER_RACK = 64
GPUS = 8
NAMESPACES = 200
MIG_PROFILES = ("full", "1g.10gb", "3g.20gb")
MIG: tuple[Placement, ...] = tuple(p for p in PLACEMENTS if p.profile in MIG_PROFILES)
# Per GPU of a MIG node: which placements (indices into MIG) are allocated.
_BY_NAME = {p.suffix or "full": n for n, p in enumerate(MIG)}
MIG_LAYOUTS: tuple[tuple[int, ...], ...] = (
    (),
    (_BY_NAME["full"],),
    tuple(_BY_NAME[f"mig-1g-10gb-{s}-{s + 1}"] for s in (0, 2, 4, 6)),
    (_BY_NAME["mig-3g-20gb-0-3"], _BY_NAME["mig-3g-20gb-4-7"]),
    (_BY_NAME["mig-1g-10gb-0-1"], _BY_NAME["mig-1g-10gb-2-3"], _BY_NAME["mig-3g-20gb-4-7"]),
)
SHARES = 18


def kind_of(i: int) -> str:
    r = i % 20
    return "whole" if r < 14 else "mig" if r < 17 else "shared"


def node_name(i: int) -> str:
    return f"node-{i:05d}"


def rack_of(i: int) -> int:
    return i // NODES_PER_RACK


# Every object listed gets its own resourceVersion, as etcd's revisions are: the
# operator keeps the last one seen per object, and one shared "1" would hide that cost.
_VERSIONS = itertools.count(10_000_000)


def _rv() -> str:
    return str(next(_VERSIONS))


def _uid(kind: str, *parts: int) -> str:
    return f"{kind}-" + "-".join(str(p) for p in parts)


def node(i: int) -> dict[str, Any]:
    name = node_name(i)
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": {"whole": "a3-highgpu-8g", "mig": "a2-highgpu-8g"}.get(
            kind_of(i), "g2-standard-96"
        ),
        "topology.kubernetes.io/region": "europe-west4",
        "topology.kubernetes.io/zone": f"europe-west4-{'abc'[i % 3]}",
        RACK_KEY: f"rack-{rack_of(i)}",
        "cloud.google.com/gke-nodepool": f"pool-{i % 40}",
        "node-role.kubernetes.io/worker": "",
    }
    return {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {"name": name, "uid": _uid("n", i), "resourceVersion": _rv(), "labels": labels},
    }


def _slice(name: str, uid: str, driver: str, pool: str, count: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "uid": uid, "resourceVersion": _rv(), "generation": 1},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
            **spec,
        },
    }


def _q(v: str | int) -> dict[str, str]:
    return {"value": str(v)}


def _whole_devices(i: int) -> list[dict[str, Any]]:
    return [
        {
            "name": f"gpu-{g}",
            "attributes": {
                "uuid": {"string": f"GPU-{i:05d}-{g}"},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "architecture": {"string": "Hopper"},
                "driverVersion": {"version": "550.54.15"},
                "pcieRoot": {"string": f"pci0000:{g * 16:02x}"},
            },
            "capacity": {"memory": _q("80Gi"), "multiprocessors": _q(132)},
        }
        for g in range(GPUS)
    ]


def _mig_devices(i: int) -> list[dict[str, Any]]:
    out = []
    for g in range(GPUS):
        for p in MIG:
            debits = {c: _q(p.memory if c == "memory" else n) for c, n in p.debits.items()}
            out.append(
                {
                    "name": f"gpu-{g}-{p.suffix}" if p.suffix else f"gpu-{g}",
                    "attributes": {
                        "profile": {"string": p.profile},
                        "parentUUID": {"string": f"GPU-{i:05d}-{g}"},
                    },
                    "capacity": {"memory": _q(p.memory), "multiprocessors": _q(p.sms)},
                    "consumesCounters": [{"counterSet": f"gpu-{g}", "counters": debits}],
                }
            )
    return out


def _shared_devices() -> list[dict[str, Any]]:
    policy = {"default": "10Gi", "validRange": {"min": "1Gi", "max": "80Gi"}}
    return [
        {
            "name": f"acc-{g}",
            "allowMultipleAllocations": True,
            "attributes": {"model": {"string": "inference-x"}},
            "capacity": {"memory": {"value": "80Gi", "requestPolicy": policy}},
        }
        for g in range(GPUS)
    ]


def _local(i: int, suffix: str, driver: str, count: int, uid: str, **spec: Any) -> dict[str, Any]:
    """A slice of node i's own pool, published for that node by name."""
    name = node_name(i)
    return _slice(f"{name}-{suffix}", uid, driver, name, count, nodeName=name, **spec)


def slices(i: int) -> list[dict[str, Any]]:
    kind = kind_of(i)
    if kind == "whole":
        return [_local(i, "gpu", "gpu.example.com", 1, _uid("s", i), devices=_whole_devices(i))]
    if kind == "shared":
        return [_local(i, "acc", "acc.example.com", 1, _uid("s", i), devices=_shared_devices())]
    counters = {c: _q("40Gi" if c == "memory" else n) for c, n in GPU_COUNTERS.items()}
    sets = [{"name": f"gpu-{g}", "counters": counters} for g in range(GPUS)]
    return [
        _local(i, "counters", "mig.example.com", 2, _uid("c", i), sharedCounters=sets),
        _local(i, "mig", "mig.example.com", 2, _uid("s", i), devices=_mig_devices(i)),
    ]


def rack_slice(r: int) -> dict[str, Any]:
    """The NICs of rack r: one pool, reached by every node of the rack."""
    term = {"matchExpressions": [{"key": RACK_KEY, "operator": "In", "values": [f"rack-{r}"]}]}
    devices = [{"name": f"nic-{n}", "attributes": {"speed": {"string": "400G"}}} for n in range(4)]
    return _slice(
        f"rack-{r}-nics",
        _uid("r", r),
        "nic.example.com",
        f"rack-{r}",
        1,
        nodeSelector={"nodeSelectorTerms": [term]},
        devices=devices,
    )


@dataclass(frozen=True)
class Alloc:
    """One claim of node i: the driver, pool and device it holds (device None: pending)."""

    node: int
    n: int  # the claim's number on its node
    driver: str
    device: str | None
    share: str | None = None  # consumed memory of a share


def allocations(i: int) -> list[Alloc]:
    kind, rng = kind_of(i), random.Random(i)
    if kind == "whole":
        out = [Alloc(i, g, "gpu.example.com", f"gpu-{g}") for g in range(GPUS - 1)]
    elif kind == "shared":
        out = [
            Alloc(i, n, "acc.example.com", f"acc-{n % GPUS}", share=f"{rng.randrange(10, 21)}Gi")
            for n in range(SHARES)
        ]
    else:
        out = []
        for g in range(GPUS):
            for p in MIG_LAYOUTS[rng.randrange(len(MIG_LAYOUTS))]:
                suffix = MIG[p].suffix
                dev = f"gpu-{g}-{suffix}" if suffix else f"gpu-{g}"
                out.append(Alloc(i, len(out), "mig.example.com", dev))
    if i % 10 == 0:  # pending claims: one in about a hundred
        out.append(Alloc(i, len(out), "gpu.example.com", None))
    return out


def claim(a: Alloc, allocated: bool = True) -> dict[str, Any]:
    name, node = f"c-{a.node:05d}-{a.n:02d}", node_name(a.node)
    exactly: dict[str, Any] = {"deviceClassName": a.driver}
    if a.share is not None:
        exactly["capacity"] = {"requests": {"memory": a.share}}
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": f"team-{a.node % NAMESPACES:03d}",
            "uid": _uid("q", a.node, a.n),
            "resourceVersion": _rv(),
        },
        "spec": {"devices": {"requests": [{"name": "dev", "exactly": exactly}]}},
    }
    if a.device is None or not allocated:
        return obj
    result: dict[str, Any] = {
        "request": "dev",
        "driver": a.driver,
        "pool": node,
        "device": a.device,
    }
    if a.share is not None:
        result["shareID"] = f"00000000-0000-4000-8000-{a.node:06d}{a.n:06d}"
        result["consumedCapacity"] = {"memory": a.share}
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    obj["status"] = {
        "allocation": {
            "devices": {"results": [result]},
            "nodeSelector": {"nodeSelectorTerms": [term]},
        },
        "reservedFor": [{"resource": "pods", "name": f"{name}-0", "uid": _uid("p", a.node, a.n)}],
    }
    return obj


def pages(objects: Iterator[dict[str, Any]], size: int = 500) -> Iterator[list[dict[str, Any]]]:
    page: list[dict[str, Any]] = []
    for obj in objects:
        page.append(obj)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


def all_nodes(n: int) -> Iterator[dict[str, Any]]:
    return (node(i) for i in range(n))


def all_slices(n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        yield from slices(i)
    for r in range((n + NODES_PER_RACK - 1) // NODES_PER_RACK):
        yield rack_slice(r)


def all_claims(n: int) -> Iterator[dict[str, Any]]:
    # Claims arrive in name order, as a list returns them: not grouped by node.
    for i in range(n):
        for a in allocations(i):
            yield claim(a)


def device_classes() -> list[dict[str, Any]]:
    """One DeviceClass per driver, named after it (what the claims ask for): read only
    by explanations of pending claims."""
    drivers = ("gpu.example.com", "mig.example.com", "acc.example.com", "nic.example.com")
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": d, "uid": f"class-{d}", "resourceVersion": _rv()},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{d}"'}}]},
        }
        for d in drivers
    ]
