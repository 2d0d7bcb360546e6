"""`kubectl dra describe resourceslice NAME` and `kubectl dra describe node NAME`."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from draview.api.attrvalues import text as attribute_text
from draview.api.slices import Device, ResourceSlice
from draview.api.status import FragmentStatus
from draview.cli.dra.cluster import NotFound
from draview.cli.dra.common import CliError
from draview.cli.dra.rbac import Visibility
from draview.cli.dra.render import Doc, caps_text, counter_lines
from draview.cli.dra.scope import Scope
from draview.cli.dra.source import Source, Statuses
from draview.cli.output import dump
from draview.engine.fragmentation import fragments, status_entries
from draview.engine.node_match import device_reaches, slice_may_reach

KINDS = {
    "resourceslice": "resourceslice",
    "resourceslices": "resourceslice",
    "slice": "resourceslice",
    "node": "node",
    "nodes": "node",
    "no": "node",
}


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "describe",
        parents=[common],
        help="describe a ResourceSlice or a Node's DRA resources",
        description="Describe a ResourceSlice (spec, per-device state and allocations, "
        "capacity, counters, pool conditions and validation errors) or the DRA devices a "
        "Node can reach, including network-attached ones.",
    )
    p.add_argument("kind", choices=sorted(KINDS), metavar="resourceslice|node")
    p.add_argument("name")
    p.set_defaults(func=run)


def source_text(st: Statuses) -> str:
    if st.origin == "operator":
        return "draview operator (ResourceSliceStatus/ResourcePoolStatus)"
    return "computed by kubectl-dra from ResourceSlices and ResourceClaims"


def _reach(s: ResourceSlice) -> str:
    if s.per_device_node_selection:
        return "per-device node selection"
    if s.all_nodes:
        return "all nodes"
    if s.node_selector is not None:
        return "nodes matching a nodeSelector"
    if s.node_name:
        return f"node {s.node_name}"
    return "unknown"


def allocation_lines(doc: Doc, level: int, dev: dict[str, Any], vis: Visibility) -> None:
    allocs = dev.get("allocations") or []
    shown, hidden = vis.split(allocs)
    hidden += max(0, int(dev.get("allocationCount", 0)) - len(allocs))
    if not shown and not hidden:
        return
    doc.head(level, "Allocations")
    for a in shown:
        parts = [f"{a['claimNamespace']}/{a['claimName']}", f"request {a.get('request') or '-'}"]
        if a.get("shareID"):
            parts.append(f"share {a['shareID']}")
        if a.get("capacity"):
            parts.append(",".join(f"{k}={v}" for k, v in sorted(a["capacity"].items())))
        if a.get("adminAccess"):
            parts.append("admin access (does not use the device)")
        doc.line(level + 1, "- " + ", ".join(parts))
    if hidden:
        doc.line(level + 1, f"- {hidden} claim{'s' if hidden != 1 else ''} you may not see")


def state_text(dev: dict[str, Any], vis: Visibility) -> str:
    state = str(dev["state"])
    if dev.get("stateReason"):
        return f"{state} ({dev['stateReason']})"
    claims = vis.claims_text(
        {
            **dev,
            "allocations": [a for a in dev.get("allocations") or [] if not a.get("adminAccess")],
        }
    )
    if state in ("Allocated", "PartiallyAllocated") and claims:
        return f"{state} to {claims}" if not claims.startswith("(") else f"{state} {claims}"
    return state


def _device_capacity(spec_dev: Any, dev: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    if dev.get("capacity"):
        return dev["capacity"], dev.get("availableCapacity") or {}
    caps = {k: c.value for k, c in (spec_dev.capacity.items() if spec_dev else [])}
    # A whole device: all of it is free or none of it.
    free = caps if dev["state"] == "Available" else {k: "0" for k in caps}
    return caps, free


def describe_slice(name: str, source: Source, vis: Visibility) -> tuple[str, dict[str, Any]]:
    raw = source.one("ResourceSlice", name)
    s = source.slice_model(name)
    st = source.statuses(Scope(s.driver, s.pool.name))
    sst = st.slice_status(name)
    pst = st.pool_status(s.driver, s.pool.name)
    doc = Doc()
    doc.block(
        0,
        [
            ("Name", s.name),
            ("API Version", raw.get("apiVersion")),
            ("Kind", "ResourceSlice"),
            ("Status Source", source_text(st)),
        ],
    )
    _slice_spec(doc, s)
    doc.head(0, "Status")
    if sst is None:
        doc.line(1, "<none>: no status for this slice")
        return doc.text(), {"slice": raw}
    status = sst.get("status") or {}
    doc.block(1, [("Observed Generation", status.get("observedGeneration"))])
    _slice_summary(doc, status.get("summary") or {})
    _slice_devices(doc, s, status.get("devices") or [], vis)
    if status.get("counterSets"):
        doc.head(1, "Counter Sets")
        counter_lines(doc, 2, status["counterSets"])
    pool_body = (pst or {}).get("status") or {}
    if not status.get("counterSets") and pool_body.get("counterSets"):
        doc.head(1, "Pool Counter Sets")
        counter_lines(doc, 2, pool_body["counterSets"])
    frag = fragmentation_lines(doc, 1, pool_body, lambda: _same_pool(s, source, st), st)
    pool_lines(doc, 1, pool_body or status.get("poolStatus") or {})
    structured: dict[str, Any] = {"slice": raw, "status": elided_status(sst, vis)}
    if frag:
        structured["fragmentation"] = frag
    if pst is not None:
        structured["poolStatus"] = pst
    return doc.text(), structured


def _same_pool(s: ResourceSlice, source: Source, st: Statuses) -> list[tuple[ResourceSlice, None]]:
    """The slices of the pool: with the operator's statuses, the ones they name (each a
    GET), else all of the driver's."""
    if st.origin == "operator" and not source.offline:
        names = {o["metadata"]["name"] for o in st.slices if o["spec"]["pool"] == s.pool.name}
        models = [s] + [m for n in sorted(names - {s.name}) if (m := _slice_or_none(source, n))]
    else:
        models = source.slice_models(Scope(s.driver, s.pool.name))
    return [(m, None) for m in models if m.driver == s.driver and m.pool.name == s.pool.name]


def _slice_or_none(source: Source, name: str) -> ResourceSlice | None:
    try:
        return source.slice_model(name)
    except NotFound:  # deleted since its status was written
        return None


def _slice_spec(doc: Doc, s: ResourceSlice) -> None:
    doc.head(0, "Spec")
    doc.block(1, [("Driver", s.driver)])
    doc.head(1, "Pool")
    doc.block(
        2,
        [
            ("Name", s.pool.name),
            ("Generation", s.pool.generation),
            ("Resource Slice Count", s.pool.resource_slice_count),
        ],
    )
    doc.block(
        1,
        [
            ("Node Name", s.node_name),
            ("Reachable From", _reach(s)),
            ("Devices", len(s.devices)),
            ("Shared Counter Sets", ", ".join(c.name for c in s.shared_counters) or None),
        ],
    )


def _slice_summary(doc: Doc, summary: dict[str, Any]) -> None:
    doc.head(1, "Summary")
    doc.block(
        2,
        [
            ("Total Devices", summary.get("totalDevices", 0)),
            ("Allocated Devices", summary.get("allocatedDevices", 0)),
            ("Partially Allocated Devices", summary.get("partiallyAllocatedDevices", 0)),
            ("Available Devices", summary.get("availableDevices", 0)),
            ("Unavailable Devices", summary.get("unavailableDevices", 0)),
        ],
    )
    for key, label in (
        ("totalCapacity", "Total Capacity"),
        ("allocatedCapacity", "Allocated Capacity"),
        ("availableCapacity", "Available Capacity"),
    ):
        if summary.get(key):
            doc.head(2, label)
            doc.block(3, caps_text(summary[key]))


def _slice_devices(
    doc: Doc, s: ResourceSlice, devices: list[dict[str, Any]], vis: Visibility
) -> None:
    spec_devices = {d.name: d for d in s.devices}
    if devices:
        doc.head(1, "Devices")
    for dev in devices:
        doc.head(2, dev["name"])
        pairs: list[tuple[str, object]] = [("State", dev["state"])]
        if dev.get("stateReason"):
            pairs.append(("Reason", dev["stateReason"]))
        doc.block(3, pairs)
        spec = spec_devices.get(dev["name"])
        if spec is not None and spec.attributes:
            # A list attribute (DRAListTypeAttributes) reads `[0, 1]`.
            doc.head(3, "Attributes")
            doc.block(4, [(k, attribute_text(v)) for k, v in sorted(spec.attributes.items())])
        allocation_lines(doc, 3, dev, vis)
        caps, free = _device_capacity(spec, dev)
        if caps:
            doc.head(3, "Capacity")
            doc.block(4, caps_text(caps))
            doc.head(3, "Available Capacity")
            doc.block(4, caps_text(free))


def elided_status(obj: dict[str, Any], vis: Visibility) -> dict[str, Any]:
    status = dict(obj.get("status") or {})
    status["devices"] = [
        {**d, "allocations": vis.elide(d["allocations"])} if d.get("allocations") else d
        for d in status.get("devices") or []
    ]
    return {**obj, "status": status}


# Pool conditions as describe names them; the last says where nodes see the pool apart.
CONDITIONS = {"Complete": "Complete", "Valid": "Valid", "ConsistentAcrossNodes": "Node Views"}


def pool_lines(doc: Doc, level: int, body: dict[str, Any]) -> None:
    if not body:
        return
    doc.head(level, "Pool Status")
    conds = {c.get("type"): c for c in body.get("conditions") or []}
    pairs: list[tuple[str, object]] = []
    if "generation" in body:
        pairs.append(("Generation", body["generation"]))
    pairs.append(
        (
            "Slices",
            f"{body.get('observedSliceCount', '?')} of {body.get('expectedSliceCount', '?')}",
        )
    )
    for t, label in CONDITIONS.items():
        c = conds.get(t)
        if c is not None:
            msg = f" ({c.get('reason')}: {c.get('message')})" if c.get("status") != "True" else ""
            pairs.append((label, f"{c.get('status')}{msg}"))
    doc.block(level + 1, pairs)
    errors = body.get("validationErrors") or []
    if errors:
        doc.head(level + 1, "Validation Errors")
        for e in errors:
            doc.line(level + 2, f"- {e}")


def describe_node(name: str, source: Source, vis: Visibility) -> tuple[str, dict[str, Any]]:
    node = source.node(name)
    scope = Scope(node=name)
    slices = source.slice_models(scope)
    # A dump may hold no Node objects, and slices may name a node that has gone: a node
    # that some slice names is still described (without labels).
    known = any(s.node_name == name for s in slices)
    if node is None and not known:
        raise NotFound(f'node "{name}" not found')
    labels = {
        str(k): str(v)
        for k, v in (((node or {}).get("metadata") or {}).get("labels") or {}).items()
    }
    st = source.statuses(scope)
    reached: dict[tuple[str, str], list[tuple[ResourceSlice, set[str]]]] = {}
    for s in sorted(slices, key=lambda x: x.name):
        if slice_may_reach(s, name, labels):
            devs = {d.name for d in s.devices if device_reaches(s, d, name, labels)}
            reached.setdefault(s.pool_key, []).append((s, devs))
    doc = Doc()
    pairs: list[tuple[str, object]] = [("Name", name)]
    if node is None:
        pairs.append(("Node", "no Node object; slices name it"))
    doc.block(0, [*pairs, ("Status Source", source_text(st))])
    if not reached:
        doc.block(0, [("DRA Resources", None)])
        return doc.text(), {"node": name, "pools": []}
    doc.head(0, "DRA Resources")
    structured = [
        _node_pool(doc, key, members, st, vis) for key, members in sorted(reached.items())
    ]
    return doc.text(), {"node": name, "pools": structured}


def _node_pool(
    doc: Doc,
    key: tuple[str, str],
    members: list[tuple[ResourceSlice, set[str]]],
    st: Statuses,
    vis: Visibility,
) -> dict[str, Any]:
    """One pool as the node reaches it: its devices there, counters, pool problems."""
    driver, pool = key
    pst = st.pool_status(driver, pool)
    pool_body = (pst or {}).get("status") or {}
    devices: list[dict[str, Any]] = []
    for s, names in members:
        sst = st.slice_status(s.name)
        for d in ((sst or {}).get("status") or {}).get("devices") or []:
            if d["name"] in names:
                devices.append(d)
    counts = Counter(d["state"] for d in devices)
    doc.block(1, [("Driver", driver), ("Pool", pool), ("Reached Through", _reach(members[0][0]))])
    doc.head(1, "Devices")
    doc.block(
        2,
        [
            ("Total", len(devices)),
            ("Allocated", counts["Allocated"] + counts["PartiallyAllocated"]),
            ("Available", counts["Available"]),
            ("Unavailable", counts["Unavailable"]),
        ],
    )
    if devices:
        doc.head(1, "Resource Details")
        for d in devices:
            doc.line(2, f"- Device: {d['name']} ({state_text(d, vis)})")
    if pool_body.get("counterSets"):
        doc.head(1, "Counter Sets")
        counter_lines(doc, 2, pool_body["counterSets"])
    frag = fragmentation_lines(
        doc, 1, pool_body, lambda: [(sl, set(names)) for sl, names in members], st
    )
    conds = {c.get("type"): c.get("status") for c in pool_body.get("conditions") or []}
    if any(conds.get(t, "True") != "True" for t in CONDITIONS):
        pool_lines(doc, 1, pool_body)
    elided = [
        {**d, "allocations": vis.elide(d["allocations"])} if d.get("allocations") else d
        for d in devices
    ]
    return {
        "driver": driver,
        "pool": pool,
        "devices": elided,
        "counterSets": pool_body.get("counterSets", []),
        **({"fragmentation": frag} if frag else {}),
    }


def fragmentation_lines(
    doc: Doc,
    level: int,
    pool_body: dict[str, Any],
    pool_slices: Callable[[], Sequence[tuple[ResourceSlice, set[str] | None]]],
    st: Statuses,
) -> list[FragmentStatus]:
    """Free capacity no single device can use, under a `Fragmentation` heading; the same
    entries as data for -o yaml|json. They are the pool status's `fragmentation`; a pool
    status without it, from an operator older than the field or one where nothing is
    fragmented, is worked out here from the pool's counters and its slices' device states
    (`pool_slices`: each slice with the names of the devices that count, None for all)."""
    entries: list[FragmentStatus] | None = pool_body.get("fragmentation")
    if entries is None and pool_body.get("counterSets"):
        devices: list[tuple[Device, str]] = []
        for s, names in pool_slices():
            states = {
                d["name"]: d["state"]
                for d in ((st.slice_status(s.name) or {}).get("status") or {}).get("devices") or []
            }
            devices.extend(
                (d, states.get(d.name, "")) for d in s.devices if names is None or d.name in names
            )
        entries = status_entries(fragments(pool_body["counterSets"], devices), [])
    if not entries:
        return []
    doc.head(level, "Fragmentation")
    for e in entries:
        doc.line(level + 1, _fragment_text(e))
    return entries


def _fragment_text(e: FragmentStatus) -> str:
    if "capacity" in e:
        return (
            f"capacity {e['capacity']}: {e['available']} left on the shareable devices, the "
            f"most left on one is {e.get('largest')} ({e.get('largestDevice')}): "
            f"{e['unusable']} no single share can use"
        )
    where = f"{e.get('counterSet')}/{e.get('counter')}"
    if "largest" not in e:
        return f"{where}: {e['available']} available, no allocatable device takes any of it"
    return (
        f"{where}: {e['available']} available, the most one allocatable device takes is "
        f"{e['largest']} ({e.get('largestDevice')}): {e['unusable']} no single device can use"
    )


def run(args: argparse.Namespace, source: Source) -> int:
    vis = Visibility(source.cluster)
    kind = KINDS[args.kind]
    try:
        if kind == "resourceslice":
            text, structured = describe_slice(args.name, source, vis)
        else:
            text, structured = describe_node(args.name, source, vis)
    except NotFound as exc:
        raise CliError(str(exc)) from None
    if args.output in ("yaml", "json"):
        sys.stdout.write(dump(structured, args.output))
    else:
        sys.stdout.write(text)
    return 0
