"""ResourceSlice in every served shape (v1, v1beta2, v1beta1 `basic`, mixins, composite draft).

Everything is normalised to one flat shape. Quantities stay strings here: parsing them is
the engine's job, so that one bad value becomes a validation error of its pool instead of
an exception that loses the whole slice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, make_dataclass
from operator import attrgetter
from typing import Any, ClassVar, Self

from pydantic import Field, GetCoreSchemaHandler, field_validator, model_validator
from pydantic_core import core_schema

from draview.api.common import (
    INT64_MAX,
    Model,
    NodeSelector,
    as_str_map,
    names_of,
    to_capacity,
)


class _Held:
    """Base of the slotted values the engine holds, one per device or slice: a million
    of them at 65,000 nodes, where a pydantic model would add a `__dict__` of every field
    and a fields-set to each. Each is validated as its pydantic `spec` (every coercion
    and error location stays the spec's) and then converted; the fast reader
    (api/fastslice.py) builds them directly."""

    __slots__ = ()
    spec: ClassVar[type[Model]]
    names: ClassVar[tuple[str, ...]]

    @classmethod
    def held(cls, spec_cls: type[Model]) -> None:
        cls.spec = spec_cls
        cls.names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]

    @classmethod
    def of(cls, spec: Model) -> Self:
        make: Any = cls
        return make(*[getattr(spec, name) for name in cls.names])  # type: ignore[no-any-return]

    @classmethod
    def model_validate(cls, data: Any) -> Self:
        return cls.of(cls.spec.model_validate(data))

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # Inside another model: validated as the spec (errors keep their location,
        # devices.3.capacity...), then converted.
        return core_schema.no_info_after_validator_function(
            cls.of, handler.generate_schema(cls.spec)
        )


class Capacity(Model):
    """One capacity of a device; requestPolicy only matters for shareable devices."""

    value: str
    request_default: str | None = None
    valid_min: str | None = None
    valid_max: str | None = None
    valid_step: str | None = None
    valid_values: tuple[str, ...] = ()


class Taint(Model):
    key: str = ""
    value: str = ""
    effect: str = ""


class _Counters(Model):
    """Counters as {name: quantity text}, plus the mixins they include (KEP-5234)."""

    counters: dict[str, str] = Field(default_factory=dict)
    includes: tuple[str, ...] = ()

    @field_validator("counters", mode="before")
    @classmethod
    def _counters(cls, v: Any) -> dict[str, str]:
        return as_str_map(v)

    @field_validator("includes", mode="before")
    @classmethod
    def _includes(cls, v: Any) -> tuple[str, ...]:
        return names_of(v)


class CounterConsumption(_Counters):
    counter_set: str = Field("", alias="counterSet")
    # DRADeviceCompatibilityGroups (1.37, alpha): the devices drawing from one counter set
    # at a time must share one of these names (none: only with others that name none).
    compatibility_groups: tuple[str, ...] = Field((), alias="compatibilityGroups")

    @field_validator("compatibility_groups", mode="before")
    @classmethod
    def _groups(cls, v: Any) -> tuple[str, ...]:
        return names_of(v)


class CounterSetSpec(_Counters):
    name: str


@dataclass(frozen=True, slots=True)
class CounterSet(_Held):
    """A counter set as the engine holds it (validated as a CounterSetSpec)."""

    name: str
    counters: dict[str, str] = field(default_factory=dict)
    includes: tuple[str, ...] = ()


CounterSet.held(CounterSetSpec)  # before a model holding one builds its schema


class _DeviceBody(Model):
    """Attributes and capacity: what devices and device mixins have in common."""

    name: str
    attributes: dict[str, Any] = Field(default_factory=dict)
    capacity: dict[str, Capacity] = Field(default_factory=dict)

    @field_validator("capacity", mode="before")
    @classmethod
    def _capacity(cls, v: Any) -> dict[str, Any]:
        return to_capacity(v)

    @field_validator("attributes", mode="before")
    @classmethod
    def _attributes(cls, v: Any) -> dict[str, Any]:
        return dict(v) if isinstance(v, dict) else {}


class DeviceSpec(_DeviceBody):
    """A device as written, in any served shape: what validation reads. The engine holds
    it as a `Device`."""

    consumes_counters: tuple[CounterConsumption, ...] = Field((), alias="consumesCounters")
    taints: tuple[Taint, ...] = ()
    allow_multiple_allocations: bool = Field(False, alias="allowMultipleAllocations")
    node_name: str | None = Field(None, alias="nodeName")
    node_selector: NodeSelector | None = Field(None, alias="nodeSelector")
    all_nodes: bool = Field(False, alias="allNodes")
    # KEP-5234 mixins and the composite draft; flattened by the engine.
    includes: tuple[str, ...] = ()
    consumes_capacity_from: tuple[str, ...] = Field((), alias="consumesCapacityFrom")
    composite: bool = False
    # DRADeviceBindingConditions: conditions the device must reach before a pod binds,
    # and whether an allocation of it binds to the node it was made for.
    binding_conditions: tuple[str, ...] = Field((), alias="bindingConditions")
    binds_to_node: bool = Field(False, alias="bindsToNode")

    @property
    def binding(self) -> Binding | None:
        return binding_of(self.binding_conditions, self.binds_to_node)

    @model_validator(mode="before")
    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        # v1beta1 wraps the device body in `basic`; the composite draft in `composite`.
        if not isinstance(data, dict):
            return data
        for wrapper in ("basic", "composite"):
            body = data.get(wrapper)
            if isinstance(body, dict):
                merged = {**body, "name": data.get("name", "")}
                if wrapper == "composite":
                    merged["composite"] = True
                return merged
        return data

    @field_validator("includes", "consumes_capacity_from", "binding_conditions", mode="before")
    @classmethod
    def _names(cls, v: Any) -> tuple[str, ...]:
        return names_of(v)

    @field_validator("consumes_counters", "taints", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return v or ()


@dataclass(frozen=True, slots=True)
class Binding:
    """What DRADeviceBindingConditions adds to a device; rare, so one slot of the device
    holds it (None for nearly every device)."""

    conditions: tuple[str, ...] = ()
    binds_to_node: bool = False


def binding_of(conditions: tuple[str, ...], binds_to_node: bool) -> Binding | None:
    return Binding(conditions, binds_to_node) if conditions or binds_to_node else None


_BINDING = attrgetter("binding")


def any_binding_conditions(devices: Sequence[Device]) -> bool:
    """Whether some device has binding conditions. Asked of every slice of every pool
    judged, whose devices almost never bind: a C pass finds no binding at all first."""
    if not any(map(_BINDING, devices)):
        return False
    return any(d.binding is not None and d.binding.conditions for d in devices)


@dataclass(frozen=True, slots=True)
class Device(_Held):
    """A device as the allocator sees it after unwrapping `basic` / `composite` (slotted:
    no per-instance `__dict__`)."""

    name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    capacity: dict[str, Capacity] = field(default_factory=dict)
    consumes_counters: tuple[CounterConsumption, ...] = ()
    taints: tuple[Taint, ...] = ()
    allow_multiple_allocations: bool = False
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    # KEP-5234 mixins and the composite draft; flattened by the engine.
    includes: tuple[str, ...] = ()
    consumes_capacity_from: tuple[str, ...] = ()
    composite: bool = False
    binding: Binding | None = None

    @property
    def binding_conditions(self) -> tuple[str, ...]:
        return self.binding.conditions if self.binding is not None else ()

    @property
    def binds_to_node(self) -> bool:
        return self.binding is not None and self.binding.binds_to_node


Device.held(DeviceSpec)  # as above


def _unfrozen_twin(cls: type[_Held]) -> Any:
    """A mutable twin of a held class: its fields with their defaults, in the same slots on
    the same base. Its __init__ stores each field as a plain attribute, where the frozen
    class's calls object.__setattr__ per field, about five times the cost; an instance
    then becomes the held class itself (CPython allows the __class__ change between
    classes of one slot layout). The fast reader builds a million devices at 65,000
    nodes."""
    specs = [
        (f.name, f.type, field(default=f.default, default_factory=f.default_factory))
        for f in fields(cls)  # type: ignore[arg-type]  # every held class is a dataclass
    ]
    return make_dataclass(f"{cls.__name__}Twin", specs, bases=cls.__bases__, slots=True)


# DeviceTwin(...) takes Device's arguments; set its __class__ to Device once filled.
DeviceTwin = _unfrozen_twin(Device)


class DeviceMixin(_DeviceBody):
    @model_validator(mode="before")
    @classmethod
    def _unwrap(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("composite"), dict):
            return {**data["composite"], "name": data.get("name", "")}
        return data


class CountersMixin(Model):
    """A counter-set mixin or a device-counter-consumption mixin: a name and counters."""

    name: str
    counters: dict[str, str] = Field(default_factory=dict)

    @field_validator("counters", mode="before")
    @classmethod
    def _counters(cls, v: Any) -> dict[str, str]:
        return as_str_map(v)


class Mixins(Model):
    device: tuple[DeviceMixin, ...] = ()
    counter_set: tuple[CountersMixin, ...] = Field((), alias="counterSet")
    device_counter_consumption: tuple[CountersMixin, ...] = Field(
        (), alias="deviceCounterConsumption"
    )


class PoolRefSpec(Model):
    name: str
    generation: int = Field(0, ge=0, le=INT64_MAX)
    # The API server requires at least one slice per pool.
    resource_slice_count: int = Field(1, ge=1, le=INT64_MAX, alias="resourceSliceCount")


@dataclass(frozen=True, slots=True)
class PoolRef(_Held):
    name: str
    generation: int = 0
    resource_slice_count: int = 1


PoolRef.held(PoolRefSpec)  # as above


class ResourceSliceSpec(Model):
    """A ResourceSlice as written, in any served version: what validation reads."""

    uid: str = ""
    name: str
    generation: int = Field(0, ge=0, le=INT64_MAX)
    api_version: str = "resource.k8s.io/v1"
    driver: str
    pool: PoolRef
    node_name: str | None = Field(None, alias="nodeName")
    node_selector: NodeSelector | None = Field(None, alias="nodeSelector")
    all_nodes: bool = Field(False, alias="allNodes")
    per_device_node_selection: bool = Field(False, alias="perDeviceNodeSelection")
    partition_type_attribute: str | None = Field(None, alias="partitionTypeAttribute")
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = Field((), alias="sharedCounters")
    mixins: Mixins = Field(default_factory=Mixins)
    # DRAOptionalNodeOperations (1.37, alpha): node-local calls the driver does without.
    skip_node_operations: tuple[str, ...] = Field((), alias="skipNodeOperations")

    @field_validator("skip_node_operations", mode="before")
    @classmethod
    def _skips(cls, v: Any) -> tuple[str, ...]:
        return names_of(v)

    @field_validator("devices", "shared_counters", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return v or ()

    @field_validator("mixins", mode="before")
    @classmethod
    def _mixins(cls, v: Any) -> Any:
        return v or {}


@dataclass(frozen=True, slots=True)
class ResourceSlice(_Held):
    """A ResourceSlice normalised from any served version."""

    name: str
    driver: str
    pool: PoolRef
    uid: str = ""
    generation: int = 0
    api_version: str = "resource.k8s.io/v1"
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    partition_type_attribute: str | None = None
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    mixins: Mixins = field(default_factory=Mixins)
    skip_node_operations: tuple[str, ...] = ()

    @property
    def pool_key(self) -> tuple[str, str]:
        return (self.driver, self.pool.name)

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> ResourceSlice:
        """Build from a Kubernetes object (metadata + spec) of any served version."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        if not isinstance(meta, dict) or not isinstance(spec, dict):
            raise TypeError("metadata and spec must be objects")
        spec = dict(spec)
        # The composite draft keeps its mixins in spec.deviceMixins; fold them into mixins.
        draft_mixins = spec.get("deviceMixins")
        if draft_mixins and not (spec.get("mixins") or {}).get("device"):
            spec["mixins"] = {**(spec.get("mixins") or {}), "device": draft_mixins}
        return cls.model_validate(
            {
                **spec,
                "uid": meta.get("uid") or "",
                "name": meta.get("name") or "",
                "generation": meta.get("generation") or 0,
                "api_version": obj.get("apiVersion") or "resource.k8s.io/v1",
            }
        )


ResourceSlice.held(ResourceSliceSpec)


__all__ = [
    "Binding",
    "Capacity",
    "CounterConsumption",
    "CounterSet",
    "CounterSetSpec",
    "CountersMixin",
    "Device",
    "DeviceMixin",
    "DeviceSpec",
    "Mixins",
    "PoolRef",
    "PoolRefSpec",
    "ResourceSlice",
    "ResourceSliceSpec",
    "Taint",
]
