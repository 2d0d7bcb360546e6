"""Put draview's engine and the real allocator (tests/fidelity/oracle.py) side by side.

For a world (Kubernetes objects), every device of every slice is probed: a claim pinned
to exactly that copy of the device (a unique attribute added to a copy of the world, and
a CEL selector on it), asking of a shareable device the smallest request its policy
permits (`engine.capacity.probe_request`, the same rule the engine applies). The engine
computes the original world; the verdicts are compared device by device.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from draview.api.fastslice import slice_from_object
from draview.api.world import build_world
from draview.engine.capacity import probe_request
from draview.engine.model import EngineOptions
from draview.engine.world import compute_world

PROBE_DOMAIN = "probe.draview.io"
PROBE_CLASS = "draview-probe"
ATTR = f'device.attributes["{PROBE_DOMAIN}"]'
ORDERS = 2  # as given and reversed; `rotations` adds the orders that matter

DeviceKey = tuple[str, int]  # (slice name, device index)


def _slices(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == "ResourceSlice"]


def pinned_world(objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of the world in which every device carries its own id and its pool."""
    out = copy.deepcopy(list(objects))
    for s in _slices(out):
        spec = s["spec"]
        pool = f"{spec['driver']}/{spec['pool']['name']}"
        for j, dev in enumerate(spec.get("devices") or ()):
            attrs = dev.setdefault("attributes", {})
            attrs[f"{PROBE_DOMAIN}/id"] = {"string": f"{s['metadata']['name']}/{j}"}
            attrs[f"{PROBE_DOMAIN}/pool"] = {"string": pool}
    return out


def claim(name: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "probe", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": requests}},
    }


def device_probes(objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    probes = []
    for s in _slices(objects):
        model = slice_from_object(s)
        name = s["metadata"]["name"]
        for j, dev in enumerate(model.devices):
            exactly: dict[str, Any] = {
                "deviceClassName": PROBE_CLASS,
                "selectors": [
                    {
                        "cel": {
                            "expression": f'device.attributes["{PROBE_DOMAIN}"].id == "{name}/{j}"'
                        }
                    }
                ],
            }
            if dev.allow_multiple_allocations and dev.capacity:
                exactly["capacity"] = {
                    "requests": {c: str(probe_request(cap)) for c, cap in dev.capacity.items()}
                }
            probes.append(
                {
                    "id": f"{name}/{j}",
                    "claim": claim(f"p{len(probes)}", [{"name": "p", "exactly": exactly}]),
                }
            )
    return probes


def rotations(objects: Sequence[dict[str, Any]]) -> list[int]:
    """Slice list orders worth asking for: the allocator trusts the resourceSliceCount of
    the first slice of a pool it meets, so where slices of one generation disagree on it,
    each of them must come first once (the list rotated to start at it)."""
    groups: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
    for i, s in enumerate(_slices(objects)):
        spec = s["spec"]
        pool = spec["pool"]
        key = (spec["driver"], pool["name"], pool.get("generation", 0))
        groups.setdefault(key, []).append((i, pool.get("resourceSliceCount", 1)))
    out: list[int] = []
    for members in groups.values():
        if len({count for _, count in members}) > 1:
            out.extend(i for i, _ in members)
    return out


def reduce(nodes: dict[str, list[str]]) -> str:
    """The oracle's answers for one probe on every node and list order: "yes" when some
    node allocates it in every order, "maybe" when only in some, else "no". An error
    aborts the scheduling attempt on every node, so any error is a "no"."""
    if any(o.startswith("error") for outs in nodes.values() for o in outs):
        return "no"
    if any(all(o == "ok" for o in outs) for outs in nodes.values()):
        return "yes"
    if any(o == "ok" for outs in nodes.values() for o in outs):
        return "maybe"
    return "no"


def engine_verdicts(
    objects: Sequence[dict[str, Any]], options: EngineOptions | None = None
) -> dict[DeviceKey, tuple[str, str, str | None]]:
    """(verdict, state, reason) per device copy, as draview reports it."""
    out: dict[DeviceKey, tuple[str, str, str | None]] = {}
    for result in compute_world(build_world(objects), options):
        for sr in result.slices:
            for j, d in enumerate(sr.status["devices"]):
                state, reason = d["state"], d.get("stateReason")
                if state in ("Available", "PartiallyAllocated"):
                    verdict = "yes"
                elif reason == "InconsistentSliceCount":
                    verdict = "maybe"
                else:
                    verdict = "no"
                out[(sr.slice.name, j)] = (verdict, state, reason)
    return out


@dataclass(frozen=True, slots=True)
class Difference:
    device: DeviceKey
    engine: tuple[str, str, str | None]
    oracle: str
    answers: dict[str, list[str]]

    @property
    def order_dependent(self) -> bool:
        return self.engine[0] == "maybe" and self.oracle != "maybe"

    def __str__(self) -> str:
        verdict, state, reason = self.engine
        return (
            f"device {self.device[0]}[{self.device[1]}]: draview {state}"
            f"{'/' + reason if reason else ''} ({verdict}), allocator {self.oracle} {self.answers}"
        )


def device_case(case_id: str, objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": case_id,
        "objects": pinned_world(objects),
        "probes": device_probes(objects),
        "orders": ORDERS,
        "rotations": rotations(objects),
    }


def compare_devices(objects: Sequence[dict[str, Any]], answer: dict[str, Any]) -> list[Difference]:
    if "error" in answer:
        raise RuntimeError(f"oracle refused the world: {answer['error']}")
    mine = engine_verdicts(objects)
    diffs = []
    for probe in answer["probes"]:
        slice_name, _, index = probe["id"].rpartition("/")
        key = (slice_name, int(index))
        theirs = reduce(probe["nodes"])
        ours = mine.get(key, ("absent", "absent", None))
        if ours[0] != theirs:
            diffs.append(Difference(key, ours, theirs, probe["nodes"]))
    return diffs
