"""`kubectl dra flatten SLICE` / `-f FILE`: slices with mixins and composite includes applied.

API servers drop `mixins` and `includes` (KEP-5234 was never served), so this is mostly
for files: what a driver author wrote, as the allocator would have seen it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from draview.api.slices import Capacity, Device, ResourceSlice
from draview.cli.dra.common import UsageError
from draview.cli.dra.source import Source, warn
from draview.cli.output import as_list, dump
from draview.engine.flatten import FlatSlice, flatten_slice


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "flatten",
        parents=[common],
        help="show slices with mixins and includes applied",
        description="Print ResourceSlices (resource.k8s.io/v1 shape) with KEP-5234 mixins "
        "and composite-device includes applied to devices, counter sets and counter "
        "consumptions. Missing mixins are reported on stderr. Without SLICE every slice "
        "of the input is printed.",
    )
    p.add_argument("slice", nargs="?", metavar="SLICE", help="ResourceSlice name")
    p.set_defaults(func=run)


def _capacity(cap: Capacity) -> dict[str, Any]:
    out: dict[str, Any] = {"value": cap.value}
    policy: dict[str, Any] = {}
    if cap.request_default is not None:
        policy["default"] = cap.request_default
    if cap.valid_values:
        policy["validValues"] = list(cap.valid_values)
    if cap.valid_min is not None or cap.valid_max is not None:
        policy["validRange"] = {
            k: v for k, v in (("min", cap.valid_min), ("max", cap.valid_max)) if v is not None
        }
    if policy:
        out["requestPolicy"] = policy
    return out


def device_v1(d: Device) -> dict[str, Any]:
    out: dict[str, Any] = {"name": d.name}
    if d.attributes:
        out["attributes"] = dict(sorted(d.attributes.items()))
    if d.capacity:
        out["capacity"] = {k: _capacity(c) for k, c in sorted(d.capacity.items())}
    if d.consumes_counters:
        out["consumesCounters"] = [
            {
                "counterSet": c.counter_set,
                "counters": {k: {"value": v} for k, v in sorted(c.counters.items())},
            }
            for c in d.consumes_counters
        ]
    if d.consumes_capacity_from:
        out["consumesCapacityFrom"] = list(d.consumes_capacity_from)
    if d.taints:
        out["taints"] = [t.model_dump(exclude_defaults=True) for t in d.taints]
    if d.allow_multiple_allocations:
        out["allowMultipleAllocations"] = True
    if d.node_name:
        out["nodeName"] = d.node_name
    if d.all_nodes:
        out["allNodes"] = True
    if d.node_selector is not None:
        out["nodeSelector"] = d.node_selector.model_dump(by_alias=True, exclude_defaults=True)
    return out


def slice_v1(fs: FlatSlice) -> dict[str, Any]:
    s: ResourceSlice = fs.slice
    spec: dict[str, Any] = {
        "driver": s.driver,
        "pool": {
            "name": s.pool.name,
            "generation": s.pool.generation,
            "resourceSliceCount": s.pool.resource_slice_count,
        },
    }
    if s.node_name:
        spec["nodeName"] = s.node_name
    if s.all_nodes:
        spec["allNodes"] = True
    if s.node_selector is not None:
        spec["nodeSelector"] = s.node_selector.model_dump(by_alias=True, exclude_defaults=True)
    if s.per_device_node_selection:
        spec["perDeviceNodeSelection"] = True
    if fs.devices:
        spec["devices"] = [device_v1(d) for d in fs.devices]
    if fs.counter_sets:
        spec["sharedCounters"] = [
            {"name": c.name, "counters": {k: {"value": v} for k, v in sorted(c.counters.items())}}
            for c in fs.counter_sets
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": s.name},
        "spec": spec,
    }


def run(args: argparse.Namespace, source: Source) -> int:
    if args.slice is None and not source.offline:
        raise UsageError("give SLICE, or -f FILE to flatten every slice in a file")
    if args.slice is not None:
        slices = [source.slice_model(args.slice)]
    else:
        slices = sorted(source.world().slices, key=lambda s: s.name)
    flat = [flatten_slice(s) for s in slices]
    for fs in flat:
        for err in fs.errors:
            warn(err)
    objs = [slice_v1(fs) for fs in flat]
    fmt = "json" if args.output == "json" else "yaml"
    if args.slice is not None:
        sys.stdout.write(dump(objs[0], fmt))
    else:
        sys.stdout.write(dump(as_list(objs), fmt))
    return 0
