"""ResourceClaim (v1/v1beta2 `exactly`/`firstAvailable`, v1beta1 flat) in one shape."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from draview.api.common import Model, as_str_map, cel_expressions


class Toleration(Model):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


class DerivedAttribute(Model):
    """A virtual attribute a request computes per device with CEL (DRADerivedAttributes,
    1.37 alpha), read by the claim's constraints in place of a published attribute."""

    name: str = ""
    expression: str = ""


class DeviceChoice(Model):
    """What one request (or one firstAvailable subrequest) asks for."""

    name: str = ""
    device_class_name: str = Field("", alias="deviceClassName")
    selectors: tuple[str, ...] = ()
    allocation_mode: str = Field("ExactCount", alias="allocationMode")
    count: int = 1
    admin_access: bool = Field(False, alias="adminAccess")
    tolerations: tuple[Toleration, ...] = ()
    capacity_requests: dict[str, str] = Field(default_factory=dict)
    derived_attributes: tuple[DerivedAttribute, ...] = Field((), alias="derivedAttributes")

    @property
    def derived(self) -> dict[str, str]:
        """name -> expression, as the allocator keys them (the last of a name wins)."""
        return {d.name: d.expression for d in self.derived_attributes}

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        data["selectors"] = cel_expressions(data.get("selectors"))
        cap = data.pop("capacity", None)
        if isinstance(cap, dict):
            data["capacity_requests"] = as_str_map(cap.get("requests"))
        for key in ("adminAccess", "count", "tolerations", "derivedAttributes"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


class Request(Model):
    name: str
    choices: tuple[DeviceChoice, ...] = ()
    prioritized: bool = False

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        # v1/v1beta2: `exactly` or `firstAvailable`; v1beta1: the fields sit on the request.
        if not isinstance(data, dict):
            return data
        name = data.get("name", "")
        if isinstance(data.get("firstAvailable"), list) and data["firstAvailable"]:
            return {"name": name, "choices": data["firstAvailable"], "prioritized": True}
        exactly = data.get("exactly")
        body: dict[str, Any] = exactly if isinstance(exactly, dict) else data
        return {"name": name, "choices": [{**body, "name": ""}]}


class Constraint(Model):
    requests: tuple[str, ...] = ()
    match_attribute: str | None = Field(None, alias="matchAttribute")
    distinct_attribute: str | None = Field(None, alias="distinctAttribute")


class AllocationResult(Model):
    """One device handed to a claim (`status.allocation.devices.results[]`)."""

    request: str = ""
    driver: str
    pool: str
    device: str
    admin_access: bool = Field(False, alias="adminAccess")
    share_id: str | None = Field(None, alias="shareID")
    consumed_capacity: dict[str, str] = Field(default_factory=dict, alias="consumedCapacity")

    @field_validator("consumed_capacity", mode="before")
    @classmethod
    def _cap(cls, v: Any) -> dict[str, str]:
        return as_str_map(v)

    @field_validator("admin_access", mode="before")
    @classmethod
    def _admin(cls, v: Any) -> bool:
        return bool(v)


class ResourceClaim(Model):
    uid: str = ""
    namespace: str = ""
    name: str
    requests: tuple[Request, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    results: tuple[AllocationResult, ...] = ()
    allocated: bool = False
    reserved_for: tuple[str, ...] = ()
    created: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> ResourceClaim:
        meta = obj.get("metadata") or {}
        devices = (obj.get("spec") or {}).get("devices") or {}
        status = obj.get("status") or {}
        allocation = status.get("allocation")
        results = ((allocation or {}).get("devices") or {}).get("results") or ()
        reserved = reserved_for(status)
        return cls.model_validate(
            {
                "uid": meta.get("uid") or "",
                "namespace": meta.get("namespace") or "",
                "name": meta.get("name") or "",
                "requests": devices.get("requests") or (),
                "constraints": devices.get("constraints") or (),
                "results": results,
                "allocated": allocation is not None,
                "reserved_for": reserved,
                "created": meta.get("creationTimestamp") or "",
            }
        )


def reserved_for(status: dict[str, Any]) -> tuple[str, ...]:
    """`resource/name` of each consumer in status.reservedFor (both readers use this)."""
    return tuple(
        f"{r.get('resource', '')}/{r.get('name', '')}"
        for r in status.get("reservedFor") or ()
        if isinstance(r, dict)
    )


# What reading an object can raise besides pydantic's ValidationError (a ValueError): a
# field of the wrong JSON type deep inside (a list where a map belongs).
READ_ERRORS = (ValueError, TypeError, AttributeError, OverflowError)


def allocated_part(obj: dict[str, Any]) -> ResourceClaim | None:
    """Only the claim's identity and the allocation results that can be read: the
    devices they name are taken whatever draview thinks of the rest of the claim."""
    meta = obj.get("metadata")
    status = obj.get("status")
    if not isinstance(meta, dict) or not isinstance(status, dict):
        return None
    allocation = status.get("allocation")
    devices = allocation.get("devices") if isinstance(allocation, dict) else None
    raw = devices.get("results") if isinstance(devices, dict) else None
    if not isinstance(raw, list):
        return None
    results = []
    for r in raw:
        try:
            results.append(AllocationResult.model_validate(r))
        except READ_ERRORS:
            continue
    if not results:
        return None

    def text(key: str) -> str:
        value = meta.get(key)
        return value if isinstance(value, str) else ""

    return ResourceClaim(
        uid=text("uid"),
        namespace=text("namespace"),
        name=text("name"),
        results=tuple(results),
        allocated=True,
    )
