"""Generate a large, consistent DRA world for the engine benchmark.

N nodes x G NVIDIA A100-SXM4-40GB, every GPU partitionable with MIG exactly as in
examples/mig-a100.yaml: per node one pool (named after the node) of two slices, one
holding the G counter sets (one per GPU) and one holding the devices (per GPU the whole
GPU plus every MIG placement of the profile table). On top, C allocated ResourceClaims
(resource.k8s.io/v1, one device each) spread over namespaces. The claims never
overcommit a counter: every GPU gets a valid MIG layout (a set of placements that fits
its counters together, checked here against the same counter arithmetic), and each claim
takes one device of such a layout.

Deterministic: the same options give a byte-identical file. Output is one JSON `List`,
written item by item so memory stays flat however large the world.

    python bench/engine/generate.py                      # 1,000 x 8, 50k claims
    python bench/engine/generate.py --nodes 10 --claims 400 --out /tmp/small.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DRIVER = "gpu.example.com"
PRODUCT = "NVIDIA A100-SXM4-40GB"
MEMORY_SLICES = 8
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "out" / "world.json"

# Counter totals of one A100 40GB (memory in Mi), as in examples/mig-a100.yaml.
GPU_COUNTERS: dict[str, int] = {
    "copy-engines": 7,
    "decoders": 5,
    "encoders": 0,
    "jpeg-engines": 1,
    "memory": 40 * 1024,
    **{f"memory-slice-{i}": 1 for i in range(MEMORY_SLICES)},
    "multiprocessors": 98,
    "ofa-engines": 1,
}


@dataclass(frozen=True)
class Profile:
    name: str
    starts: tuple[int, ...]  # first memory slice of each placement
    width: int  # memory slices per placement
    memory_mi: int
    sms: int
    copy_engines: int
    decoders: int
    media: bool  # takes the single JPEG decoder and OFA engine


# The KEP-4815 / NVIDIA A100 40GB profile table (seed 002), smallest first: the
# allocator takes the first fit, so drivers list small placements first.
PROFILES = (
    Profile("1g.5gb", tuple(range(7)), 1, 4864, 14, 1, 0, False),
    Profile("1g.5gb+me", tuple(range(7)), 1, 4864, 14, 1, 1, True),
    Profile("1g.10gb", (0, 2, 4, 6), 2, 9856, 14, 1, 1, False),
    Profile("2g.10gb", (0, 2, 4), 2, 9856, 28, 2, 1, False),
    Profile("3g.20gb", (0, 4), 4, 19968, 42, 3, 2, False),
    Profile("4g.20gb", (0,), 4, 19968, 56, 4, 2, False),
    Profile("7g.40gb", (0,), 8, 40192, 98, 7, 5, True),
)


@dataclass(frozen=True)
class Placement:
    """One device of a GPU: a MIG placement, or the whole GPU (profile `full`)."""

    suffix: str  # device name without the gpu-<i>- prefix
    profile: str
    slices: str  # memorySlices attribute, "" for the whole GPU
    memory: str  # capacity / counter quantity text
    sms: int
    debits: dict[str, int]  # counter -> amount (memory in Mi), zero amounts left out


def _mig_placements() -> list[Placement]:
    out: list[Placement] = []
    for p in PROFILES:
        for start in p.starts:
            end = start + p.width - 1
            span = f"{start}" if p.width == 1 else f"{start}-{end}"
            debits = {
                "copy-engines": p.copy_engines,
                "decoders": p.decoders,
                "jpeg-engines": int(p.media),
                "memory": p.memory_mi,
                **{f"memory-slice-{i}": 1 for i in range(start, end + 1)},
                "multiprocessors": p.sms,
                "ofa-engines": int(p.media),
            }
            out.append(
                Placement(
                    suffix=f"mig-{p.name.replace('.', '-').replace('+', '-')}-{span}",
                    profile=p.name,
                    slices=span,
                    memory=f"{p.memory_mi}Mi",
                    sms=p.sms,
                    debits={k: v for k, v in sorted(debits.items()) if v},
                )
            )
    return out


PLACEMENTS: tuple[Placement, ...] = (
    *_mig_placements(),
    # The whole GPU with MIG disabled needs every counter of the set.
    Placement("", "full", "", "40Gi", 98, {k: v for k, v in GPU_COUNTERS.items() if v}),
)


def _fits(layout: tuple[int, ...]) -> bool:
    used: dict[str, int] = {}
    for i in layout:
        for counter, amount in PLACEMENTS[i].debits.items():
            used[counter] = used.get(counter, 0) + amount
            if used[counter] > GPU_COUNTERS[counter]:
                return False
    return True


def valid_layouts() -> dict[int, list[tuple[int, ...]]]:
    """Every set of placements one GPU can hold at once, by size (index tuples, sorted)."""
    by_size: dict[int, list[tuple[int, ...]]] = {}

    def extend(layout: tuple[int, ...], start: int) -> None:
        by_size.setdefault(len(layout), []).append(layout)
        for i in range(start, len(PLACEMENTS)):
            cand = (*layout, i)
            if _fits(cand):  # any subset of a valid layout is valid, so prune here
                extend(cand, i + 1)

    extend((), 0)
    return by_size


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _q(n: int) -> dict[str, str]:
    return {"value": str(n)}


def _debits_json(p: Placement) -> dict[str, dict[str, str]]:
    return {c: {"value": p.memory if c == "memory" else str(n)} for c, n in p.debits.items()}


def counter_slice(node: str, gpus: int, uid: str) -> dict[str, Any]:
    counters = {c: {"value": "40Gi"} if c == "memory" else _q(n) for c, n in GPU_COUNTERS.items()}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-counters", "uid": uid, "generation": 1},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 2},
            "nodeName": node,
            "sharedCounters": [
                {"name": f"gpu-{g}-counter-set", "counters": counters} for g in range(gpus)
            ],
        },
    }


def device_slice(node: str, gpu_uuids: list[str], uid: str) -> dict[str, Any]:
    devices: list[dict[str, Any]] = []
    for g, gpu_uuid in enumerate(gpu_uuids):
        for p in PLACEMENTS:
            if p.profile == "full":
                attrs = {
                    "type": {"string": "gpu"},
                    "profile": {"string": "full"},
                    "uuid": {"string": gpu_uuid},
                    "productName": {"string": PRODUCT},
                }
                name = f"gpu-{g}"
            else:
                attrs = {
                    "type": {"string": "mig"},
                    "profile": {"string": p.profile},
                    "parentUUID": {"string": gpu_uuid},
                    "memorySlices": {"string": p.slices},
                }
                name = f"gpu-{g}-{p.suffix}"
            devices.append(
                {
                    "name": name,
                    "attributes": attrs,
                    "capacity": {"memory": {"value": p.memory}, "multiprocessors": _q(p.sms)},
                    "consumesCounters": [
                        {"counterSet": f"gpu-{g}-counter-set", "counters": _debits_json(p)}
                    ],
                }
            )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-devices", "uid": uid, "generation": 1},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 2},
            "nodeName": node,
            "devices": devices,
        },
    }


def device_classes() -> list[dict[str, Any]]:
    def cls(name: str, kind: str) -> dict[str, Any]:
        expr = (
            f"device.driver == '{DRIVER}' && 'type' in device.attributes['{DRIVER}'] && "
            f"device.attributes['{DRIVER}'].type == '{kind}'"
        )
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr}}]},
        }

    return [cls("gpu.example.com", "gpu"), cls("mig.example.com", "mig")]


def claim(
    name: str, namespace: str, uid: str, node: str, device: str, p: Placement, rng: random.Random
) -> dict[str, Any]:
    request = "gpu" if p.profile == "full" else "mig"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": request,
                        "exactly": {
                            "deviceClassName": f"{request}.example.com",
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": f"device.attributes['{DRIVER}']"
                                        f".profile == '{p.profile}'"
                                    }
                                }
                            ],
                        },
                    }
                ]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": request, "driver": DRIVER, "pool": node, "device": device}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": f"{name}-0", "uid": _uid(rng)}],
        },
    }


def layout_sizes(gpus: int, claims: int, max_size: int, rng: random.Random) -> list[int]:
    """How many claims each GPU serves: random, summing to `claims`, each in 0..max_size."""
    if claims > gpus * max_size:
        raise SystemExit(
            f"{claims} claims cannot fit on {gpus} GPUs without overcommitting "
            f"(at most {max_size} devices per GPU: {gpus * max_size})"
        )
    mean = claims / gpus if gpus else 0.0
    # Spread around the mean; clip to the range, then fix the sum one GPU at a time.
    sizes = [min(max_size, max(0, round(rng.gauss(mean, 1.5)))) for _ in range(gpus)]
    diff = claims - sum(sizes)
    order = list(range(gpus))
    while diff:
        rng.shuffle(order)
        step = 1 if diff > 0 else -1
        for i in order:
            if diff == 0:
                break
            if 0 <= sizes[i] + step <= max_size:
                sizes[i] += step
                diff -= step
    return sizes


def generate(
    nodes: int, gpus: int, claims: int, seed: int, namespaces: int
) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    layouts = valid_layouts()
    max_size = max(layouts)
    width = max(4, len(str(nodes - 1)))
    node_names = [f"gpu-node-{n:0{width}d}" for n in range(nodes)]
    ns_names = [f"team-{i:03d}" for i in range(namespaces)]

    yield from device_classes()
    for node in node_names:
        gpu_uuids = [f"GPU-{_uid(rng)}" for _ in range(gpus)]
        yield counter_slice(node, gpus, _uid(rng))
        yield device_slice(node, gpu_uuids, _uid(rng))

    sizes = layout_sizes(nodes * gpus, claims, max_size, rng)
    allocated: list[tuple[str, str, Placement]] = []
    for gi, size in enumerate(sizes):
        if size == 0:
            continue
        node, g = node_names[gi // gpus], gi % gpus
        for i in rng.choice(layouts[size]):
            p = PLACEMENTS[i]
            allocated.append((node, f"gpu-{g}-{p.suffix}" if p.suffix else f"gpu-{g}", p))
    # Claims arrive in no particular order relative to nodes.
    rng.shuffle(allocated)
    for n, (node, device, p) in enumerate(allocated):
        ns = ns_names[rng.randrange(namespaces)]
        workload = p.profile.replace(".", "-").replace("+", "-")
        yield claim(f"{workload}-{n:06d}", ns, _uid(rng), node, device, p, rng)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gpus", type=int, default=8, help="A100s per node")
    ap.add_argument("--claims", type=int, default=50_000, help="allocated ResourceClaims")
    ap.add_argument("--namespaces", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)

    start = time.perf_counter()
    counts: dict[str, int] = {}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write('{"apiVersion":"v1","kind":"List","metadata":{},"items":[\n')
        first = True
        for obj in generate(args.nodes, args.gpus, args.claims, args.seed, args.namespaces):
            if not first:
                fh.write(",\n")
            first = False
            fh.write(json.dumps(obj, separators=(",", ":")))
            counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
        fh.write("\n]}\n")
    devices = args.nodes * args.gpus * len(PLACEMENTS)
    print(
        f"{args.out}: {args.out.stat().st_size / 2**20:.1f} MiB, "
        f"{counts.get('ResourceSlice', 0)} slices, {devices} devices "
        f"({len(PLACEMENTS)} per GPU), {counts.get('ResourceClaim', 0)} claims, "
        f"{time.perf_counter() - start:.1f}s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
