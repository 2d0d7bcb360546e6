"""`kubectl dra get pools|slices|devices`: what is free, per driver, pool and node."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from draview.cli.dra.common import UsageError
from draview.cli.dra.rbac import Visibility
from draview.cli.dra.scope import Scope
from draview.cli.dra.source import Source, Statuses
from draview.cli.output import as_list, dump
from draview.cli.status_tables import (
    DEVICE_HEAD,
    DEVICE_WIDE,
    POOL_HEAD,
    POOL_WIDE,
    SLICE_HEAD,
    SLICE_WIDE,
    device_row,
    pool_row,
    slice_row,
)
from draview.cli.tables import render_table
from draview.engine.node_match import device_reaches, slice_may_reach

KINDS = {
    "pools": "pools",
    "pool": "pools",
    "resourcepools": "pools",
    "slices": "slices",
    "slice": "slices",
    "resourceslices": "slices",
    "devices": "devices",
    "device": "devices",
}


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "get",
        parents=[common],
        help="tables of pools, slices or devices with what is free",
        description="List pools, slices or devices with their total, allocated, available "
        "and unavailable devices. Filters combine; --node includes devices the node reaches "
        "through a nodeSelector, allNodes or per-device node selection.",
    )
    p.add_argument("resource", choices=sorted(KINDS), metavar="pools|slices|devices")
    p.add_argument("--driver", help="only this driver")
    p.add_argument("--pool", help="only this pool")
    p.add_argument("--node", help="only what this node can reach")
    p.add_argument("--sort-by", metavar="COLUMN", help="sort by a column, e.g. AVAILABLE")
    p.set_defaults(func=run)


class Filter:
    """--driver/--pool/--node over status objects."""

    def __init__(self, args: argparse.Namespace, source: Source) -> None:
        self.driver: str | None = args.driver
        self.pool: str | None = args.pool
        self.node: str | None = args.node
        self.scope = Scope(self.driver, self.pool, self.node)
        self.slices: set[str] = set()
        self.devices: set[tuple[str, str]] = set()  # (slice, device)
        if self.node:
            labels = source.node_labels(self.node)
            for s in source.slice_models(self.scope):
                if slice_may_reach(s, self.node, labels):
                    self.slices.add(s.name)
                    for d in s.devices:
                        if device_reaches(s, d, self.node, labels):
                            self.devices.add((s.name, d.name))

    def spec(self, obj: dict[str, Any]) -> bool:
        spec = obj.get("spec") or {}
        return (self.driver is None or spec.get("driver") == self.driver) and (
            self.pool is None or spec.get("pool") == self.pool
        )

    def slice_ok(self, obj: dict[str, Any]) -> bool:
        return self.spec(obj) and (self.node is None or obj["metadata"]["name"] in self.slices)

    def device_ok(self, slice_name: str, device: str) -> bool:
        return self.node is None or (slice_name, device) in self.devices

    def pool_ok(self, obj: dict[str, Any], st: Statuses) -> bool:
        if not self.spec(obj):
            return False
        if self.node is None:
            return True
        names = set((obj.get("status") or {}).get("slices") or [])
        return bool(names & self.slices)


def sort_rows(
    headers: Sequence[str], rows: list[list[object]], column: str | None
) -> list[list[object]]:
    if not column:
        return rows
    wanted = column.strip().lstrip(".").upper()
    if wanted not in headers:
        raise UsageError(f"--sort-by: no column {column!r} (columns: {', '.join(headers)})")
    i = list(headers).index(wanted)
    values = [r[i] for r in rows]
    if all(isinstance(v, int) for v in values):
        return sorted(rows, key=lambda r: int(str(r[i])))
    return sorted(rows, key=lambda r: str(r[i] if r[i] is not None else ""))


def pools_rows(
    st: Statuses, flt: Filter, wide: bool
) -> tuple[list[str], list[list[object]], list[dict[str, Any]]]:
    objs = [o for o in st.pools if flt.pool_ok(o, st)]
    return POOL_HEAD + (POOL_WIDE if wide else []), [pool_row(o, wide) for o in objs], objs


def slices_rows(
    st: Statuses, flt: Filter, wide: bool
) -> tuple[list[str], list[list[object]], list[dict[str, Any]]]:
    objs = [o for o in st.slices if flt.slice_ok(o)]
    return SLICE_HEAD + (SLICE_WIDE if wide else []), [slice_row(o, wide) for o in objs], objs


def devices_rows(
    st: Statuses, flt: Filter, wide: bool, vis: Visibility
) -> tuple[list[str], list[list[object]], list[dict[str, Any]]]:
    rows: list[list[object]] = []
    items: list[dict[str, Any]] = []
    for o in st.slices:
        if not flt.slice_ok(o):
            continue
        for d in (o.get("status") or {}).get("devices") or []:
            if not flt.device_ok(o["metadata"]["name"], d["name"]):
                continue
            rows.append(device_row(o, d, vis.claims_text, wide))
            item = {
                "driver": o["spec"]["driver"],
                "pool": o["spec"]["pool"],
                "slice": o["metadata"]["name"],
                **({"nodeName": o["spec"]["nodeName"]} if o["spec"].get("nodeName") else {}),
                **d,
            }
            if "allocations" in item:
                item["allocations"] = vis.elide(item["allocations"])
            items.append(item)
    return DEVICE_HEAD + (DEVICE_WIDE if wide else []), rows, items


def elide_objects(objs: list[dict[str, Any]], vis: Visibility) -> list[dict[str, Any]]:
    out = []
    for o in objs:
        devices = (o.get("status") or {}).get("devices")
        if devices:
            o = {
                **o,
                "status": {
                    **o["status"],
                    "devices": [
                        {**d, "allocations": vis.elide(d["allocations"])}
                        if "allocations" in d
                        else d
                        for d in devices
                    ],
                },
            }
        out.append(o)
    return out


def run(args: argparse.Namespace, source: Source) -> int:
    kind = KINDS[args.resource]
    flt = Filter(args, source)
    st = source.statuses(flt.scope)
    vis = Visibility(source.cluster)
    wide = args.output == "wide"
    if kind == "pools":
        head, rows, objs = pools_rows(st, flt, wide)
    elif kind == "slices":
        head, rows, objs = slices_rows(st, flt, wide)
    else:
        head, rows, objs = devices_rows(st, flt, wide, vis)
    if args.output in ("yaml", "json"):
        if kind != "devices":
            objs = elide_objects(objs, vis)
        sys.stdout.write(dump(as_list(objs), args.output))
        return 0
    rows = sort_rows(head, rows, args.sort_by)
    if not rows:
        print("No resources found", file=sys.stderr)
        return 0
    sys.stdout.write(render_table(head, rows))
    return 0
