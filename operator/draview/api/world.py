"""A snapshot of the objects draview reads, built from raw Kubernetes objects."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from draview.api.claims import ResourceClaim
from draview.api.fastslice import Interner, slice_from_object
from draview.api.nodes import NodeInfo
from draview.api.slices import ResourceSlice
from draview.api.taints import DeviceClass, DeviceTaintRule

RESOURCE_GROUP = "resource.k8s.io"
KINDS = ("ResourceSlice", "ResourceClaim", "DeviceTaintRule", "DeviceClass")


@dataclass(frozen=True, slots=True)
class ObjectProblem:
    """An object that could not be read. `pool` names the pool it belongs to, if known."""

    kind: str
    name: str
    message: str
    pool: tuple[str, str] | None = None

    def __str__(self) -> str:
        return f"InvalidObject: {self.kind} {self.name}: {self.message}"


@dataclass(slots=True)
class World:
    slices: list[ResourceSlice] = field(default_factory=list)
    claims: list[ResourceClaim] = field(default_factory=list)
    taint_rules: list[DeviceTaintRule] = field(default_factory=list)
    classes: list[DeviceClass] = field(default_factory=list)
    problems: list[ObjectProblem] = field(default_factory=list)
    # None: the input said nothing about nodes (the engine then assumes a node that every
    # node selector matches); a list: the cluster's nodes, as the scheduler knows them.
    nodes: list[NodeInfo] | None = None


def iter_objects(docs: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Every object in documents that may be single objects or (nested) Lists."""
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        items = doc.get("items")
        if isinstance(items, list) and str(doc.get("kind", "List")).endswith("List"):
            yield from iter_objects(items)
        else:
            yield doc


def short_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg"))


def pool_of(obj: dict[str, Any]) -> tuple[str, str] | None:
    spec = obj.get("spec") or {}
    pool = spec.get("pool") if isinstance(spec, dict) else None
    if isinstance(pool, dict) and isinstance(spec.get("driver"), str):
        return (spec["driver"], str(pool.get("name", "")))
    return None


def is_resource_kind(obj: dict[str, Any], kind: str) -> bool:
    api_version = str(obj.get("apiVersion", ""))
    return obj.get("kind") == kind and api_version.split("/")[0] == RESOURCE_GROUP


def build_world(objects: Iterable[dict[str, Any]]) -> World:
    """Normalise objects; unrelated kinds are ignored, unreadable ones become problems."""
    world = World()
    cache = Interner()
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node" and obj.get("apiVersion") == "v1":
            try:
                node = NodeInfo.from_object(obj)
            except ValueError as exc:
                world.problems.append(ObjectProblem("Node", "", str(exc)))
                continue
            if world.nodes is None:
                world.nodes = []
            world.nodes.append(node)
            continue
        if kind not in KINDS or not is_resource_kind(obj, str(kind)):
            continue
        name = str((obj.get("metadata") or {}).get("name", ""))
        try:
            if kind == "ResourceSlice":
                world.slices.append(slice_from_object(obj, cache))
            elif kind == "ResourceClaim":
                world.claims.append(ResourceClaim.from_object(obj))
            elif kind == "DeviceTaintRule":
                world.taint_rules.append(DeviceTaintRule.from_object(obj))
            else:
                world.classes.append(DeviceClass.from_object(obj))
        except ValidationError as exc:
            pool = pool_of(obj) if kind == "ResourceSlice" else None
            world.problems.append(ObjectProblem(str(kind), name, short_error(exc), pool))
        except (AttributeError, TypeError) as exc:
            # A field of the wrong JSON type deep inside (a list where a map belongs).
            pool = pool_of(obj) if kind == "ResourceSlice" else None
            world.problems.append(ObjectProblem(str(kind), name, str(exc), pool))
    return world
