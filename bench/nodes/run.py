"""What watching Nodes costs the operator: memory per node, CPU per node event.

The controller's own code (store, node index, engine) is fed in process, as the watches
would feed it: N nodes with realistic labels, a node-local GPU pool per node, and pools
that reach nodes by allNodes or by selector (rack, zone). Then node events of each kind:
how many pools each re-judges, and what the event plus that judgement cost.

    python bench/nodes/run.py [--nodes 5000] [--events 50]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "operator"))

from draview.controller.core import Controller, Settings
from draview.controller.ratelimit import TokenBucket
from draview.controller.writer import Writer

RACK, ZONE = "topology.example.com/rack", "topology.kubernetes.io/zone"


def node(i: int, rack: int) -> dict[str, Any]:
    name = f"gpu-node-{i:05}"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "a2-highgpu-8g",
        "topology.kubernetes.io/region": "europe-west4",
        ZONE: f"europe-west4-{'abc'[i % 3]}",
        RACK: f"rack-{rack}",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/cuda.driver.major": "550",
        "cloud.google.com/gke-nodepool": f"pool-{i % 20}",
        "cloud.google.com/gke-os-distribution": "cos",
        "cloud.google.com/machine-family": "a2",
        "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
        "feature.node.kubernetes.io/kernel-version.major": "6",
        "node-role.kubernetes.io/worker": "",
    }
    return {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": labels},
    }


def rslice(name: str, driver: str, devices: int, **reach: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {
            "driver": driver,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"dev-{j}"} for j in range(devices)],
            **reach,
        },
    }


def selector(key: str, value: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    return {"nodeSelector": {"nodeSelectorTerms": [term]}}


def controller() -> Controller:
    ctl = Controller(Writer(None, TokenBucket(1, 1)), Settings())  # type: ignore[arg-type]
    ctl.leader = True
    return ctl


def timed_event(ctl: Controller, obj: dict[str, Any], kind: str = "MODIFIED") -> dict[str, Any]:
    ctl.queue.dirty.clear()
    start = time.perf_counter()
    ctl.ingest.node_event(kind, obj)
    marked = len(ctl.queue.dirty)
    ctl.reconciler.compute(list(ctl.queue.dirty))
    return {"pools": marked, "seconds": time.perf_counter() - start}


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    secs = sorted(s["seconds"] for s in samples)
    return {
        "events": len(samples),
        "pools_rejudged": max(s["pools"] for s in samples),
        "median_ms": round(statistics.median(secs) * 1000, 2),
        "max_ms": round(secs[-1] * 1000, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--racks", type=int, default=50)
    ap.add_argument("--events", type=int, default=50, help="events timed per kind")
    ap.add_argument("--out", default="bench/out/nodes-result.json")
    args = ap.parse_args()
    rng = random.Random(1)
    nodes = [node(i, i % args.racks) for i in range(args.nodes)]
    slices = [
        rslice(n["metadata"]["name"], "gpu.example.com", 8, nodeName=n["metadata"]["name"])
        for n in nodes
    ]
    slices += [rslice(f"fabric-{i}", "net.example.com", 4, allNodes=True) for i in range(10)]
    slices += [
        rslice(f"rack-{r}", "nvlink.example.com", 2, **selector(RACK, f"rack-{r}"))
        for r in range(args.racks)
    ]
    slices += [
        rslice(f"zone-{z}", "storage.example.com", 2, **selector(ZONE, f"europe-west4-{z}"))
        for z in "abc"
    ]

    ctl = controller()
    for s in slices:
        ctl.ingest.slice_event("ADDED", s)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for n in nodes:
        ctl.ingest.node_event("ADDED", n)
    gc.collect()
    node_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()

    start = time.perf_counter()
    ctl.reconciler.compute(ctl.store.pools())
    full = time.perf_counter() - start
    selecting = len(ctl.nodes.selecting())

    results: dict[str, Any] = {}
    # A label no selector reads (most label churn: node pools, feature discovery).
    results["unread label changed"] = summarise(
        [
            timed_event(ctl, _relabel(n, "cloud.google.com/gke-nodepool", f"pool-{k}"))
            for k, n in enumerate(rng.sample(nodes, args.events))
        ]
    )
    results["rack label changed"] = summarise(
        [
            timed_event(ctl, _relabel(n, RACK, f"rack-{rng.randrange(args.racks)}"))
            for n in rng.sample(nodes, args.events)
        ]
    )
    results["status-only update"] = summarise(
        [timed_event(ctl, _bump(n)) for n in rng.sample(nodes, args.events)]
    )
    fresh = [node(args.nodes + i, i % args.racks) for i in range(args.events)]
    results["node added"] = summarise([timed_event(ctl, n, "ADDED") for n in fresh])
    results["node deleted"] = summarise([timed_event(ctl, n, "DELETED") for n in fresh])

    report = {
        "nodes": args.nodes,
        "pools": len(ctl.store.pools()),
        "pools_selecting_nodes": selecting,
        "bytes_per_node": round(node_bytes / args.nodes),
        "full_compute_s": round(full, 2),
        "events": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"{args.nodes} nodes, {report['pools']} pools ({selecting} select nodes)")
    print(f"node index: {report['bytes_per_node']} bytes per node (names, labels, snapshot)")
    print(f"full compute of every pool: {report['full_compute_s']} s")
    print(f"{'EVENT':<24}{'POOLS RE-JUDGED':>16}{'MEDIAN':>10}{'MAX':>10}")
    for what, r in results.items():
        print(f"{what:<24}{r['pools_rejudged']:>16}{r['median_ms']:>8} ms{r['max_ms']:>7} ms")


def _relabel(obj: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    meta = obj["metadata"]
    meta["labels"] = {**meta["labels"], key: value}
    meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
    return obj


def _bump(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
    return obj


if __name__ == "__main__":
    main()
