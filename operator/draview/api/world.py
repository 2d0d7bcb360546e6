"""A snapshot of the objects draview reads, built from raw Kubernetes objects."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from draview.api.claims import READ_ERRORS, ResourceClaim
from draview.api.common import clip, error_text, text_of
from draview.api.fastclaim import read_claim
from draview.api.fastslice import Interner, slice_from_object
from draview.api.node_info import NodeInfo
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

    def __post_init__(self) -> None:
        # Whatever the caller quoted from the input, a warning stays one short line.
        object.__setattr__(self, "name", clip(self.name))
        object.__setattr__(self, "message", clip(self.message))

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
        kind = doc.get("kind", "List")
        if isinstance(items, list) and isinstance(kind, str) and kind.endswith("List"):
            yield from iter_objects(items)
        else:
            yield doc


def short_error(exc: ValidationError) -> str:
    return error_text(exc)


def pool_of(obj: dict[str, Any]) -> tuple[str, str] | None:
    """The (driver, pool) a slice names, when both can be read as strings."""
    spec = obj.get("spec") or {}
    pool = spec.get("pool") if isinstance(spec, dict) else None
    name = pool.get("name", "") if isinstance(pool, dict) else None
    if isinstance(name, str) and isinstance(spec.get("driver"), str):
        return (spec["driver"], name)
    return None


def object_name(obj: dict[str, Any]) -> str:
    """`name` or `namespace/name`, short, whatever the metadata holds."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return text_of(meta)
    name = text_of(meta.get("name", ""))
    namespace = meta.get("namespace")
    return f"{text_of(namespace)}/{name}" if namespace else name


def is_resource_kind(obj: dict[str, Any], kind: str) -> bool:
    api_version = obj.get("apiVersion", "")
    return (
        obj.get("kind") == kind
        and isinstance(api_version, str)
        and api_version.split("/")[0] == RESOURCE_GROUP
    )


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
        if not isinstance(kind, str) or kind not in KINDS or not is_resource_kind(obj, kind):
            continue
        if kind == "ResourceClaim":
            _add_claim(world, obj)
            continue
        try:
            if kind == "ResourceSlice":
                world.slices.append(slice_from_object(obj, cache))
            elif kind == "DeviceTaintRule":
                world.taint_rules.append(DeviceTaintRule.from_object(obj))
            else:
                world.classes.append(DeviceClass.from_object(obj))
        except READ_ERRORS as exc:
            pool = pool_of(obj) if kind == "ResourceSlice" else None
            world.problems.append(ObjectProblem(kind, object_name(obj), error_text(exc), pool))
    return world


def _add_claim(world: World, obj: dict[str, Any]) -> None:
    """A claim; a damaged one keeps the devices its allocation names taken, and each pool
    it names gets the problem (its devices' state depends on a claim draview cannot read)."""
    claim, message = read_claim(obj)
    if claim is not None:
        world.claims.append(claim)
    if message is None:
        return
    pools: list[tuple[str, str] | None] = []
    if claim is not None:
        pools.extend(sorted({(r.driver, r.pool) for r in claim.results}))
    name = object_name(obj)
    for pool in pools or [None]:
        world.problems.append(ObjectProblem("ResourceClaim", name, message, pool))
