"""A fast reader for ResourceClaims in the shape the API server serves nearly always.

Validating a claim through the pydantic models (four to six models each, `mode="before"`
validators among them) is Python work per field, and a large cluster holds a claim per pod.
This reader takes the v1/v1beta2 shape (requests with `exactly` or `firstAvailable`,
constraints, allocation results, reservedFor) by hand, checking each value it keeps as
strictly as the models would accept it. Anything else (v1beta1's flat requests,
tolerations, capacity requests, a value of an unexpected type, a field written under its
Python name) returns None and goes through the models, which stay the single source of
coercions and error messages. For input it accepts, it builds objects equal to what the
models build (tests/unit/test_fast_claims.py checks both ways).
"""

from __future__ import annotations

import marshal
from typing import Any

from draview.api.claims import (
    READ_ERRORS,
    AllocationResult,
    Constraint,
    DeviceChoice,
    Request,
    ResourceClaim,
    allocated_part,
    reserved_for,
)
from draview.api.common import as_str_map, cel_expressions, error_text
from draview.api.construct import construct, field_keys

# Keys of a choice, a constraint and a result that the models read and this reader does
# not: their presence sends the claim to the models. ("capacity" is read by DeviceChoice's
# validator under that name; tolerations are read here only when there are none.)
_CHOICE_KEYS = frozenset(
    {"name", "deviceClassName", "selectors", "allocationMode", "count", "adminAccess"}
)
_CHOICE_OTHERS = (field_keys(DeviceChoice) | {"capacity"}) - _CHOICE_KEYS - {"tolerations"}
_CONSTRAINT_OTHERS = field_keys(Constraint) - {"requests", "matchAttribute", "distinctAttribute"}
_RESULT_OTHERS = field_keys(AllocationResult) - {
    "request",
    "driver",
    "pool",
    "device",
    "adminAccess",
    "shareID",
    "consumedCapacity",
}


class _Unusual(Exception):
    """Raised inside the reader when the models must read the claim."""


def _text(value: Any) -> str:
    """A metadata string the models read with `value or ""`: None reads as ""; anything
    but a string is for the models to judge."""
    if value is None:
        return ""
    if type(value) is not str:
        raise _Unusual
    return value


def _field(raw: dict[str, Any], key: str, default: str) -> str:
    """A string field of a model: absent, the model's default; present, a string (a
    null is the models' error to report)."""
    value = raw.get(key, default)
    if type(value) is not str:
        raise _Unusual
    return value


def _optional_text(value: Any) -> str | None:
    if value is None or type(value) is str:
        return value
    raise _Unusual


def _map(value: Any) -> dict[str, Any]:
    """An object the models read with `value or {}`: None or a map."""
    if value is None:
        return {}
    if type(value) is not dict:
        raise _Unusual
    return value


def _list(value: Any) -> list[Any]:
    """An array the models read with `value or ()`: None or a list."""
    if value is None:
        return []
    if type(value) is not list:
        raise _Unusual
    return value


def _choice(body: Any, name: str) -> DeviceChoice:
    if type(body) is not dict or not _CHOICE_OTHERS.isdisjoint(body):
        raise _Unusual
    tolerations = body.get("tolerations")
    count = body.get("count")
    admin = body.get("adminAccess")
    if tolerations is not None and tolerations != []:
        raise _Unusual
    if count is not None and type(count) is not int:
        raise _Unusual
    if admin is not None and type(admin) is not bool:
        raise _Unusual
    return construct(
        DeviceChoice,
        {
            "name": name,
            "device_class_name": _field(body, "deviceClassName", ""),
            "selectors": cel_expressions(body.get("selectors")),
            "allocation_mode": _field(body, "allocationMode", "ExactCount"),
            "count": 1 if count is None else count,
            "admin_access": bool(admin),
        },
    )


def _request(raw: Any) -> Request:
    if type(raw) is not dict:
        raise _Unusual
    name = _field(raw, "name", "")
    alternatives = raw.get("firstAvailable")
    if type(alternatives) is list and alternatives:
        choices = tuple(
            _choice(sub, _field(sub, "name", "") if type(sub) is dict else "")
            for sub in alternatives
        )
        return construct(Request, {"name": name, "choices": choices, "prioritized": True})
    exactly = raw.get("exactly")
    if type(exactly) is not dict:
        raise _Unusual  # v1beta1: the request is its own body
    return construct(Request, {"name": name, "choices": (_choice(exactly, ""),)})


def _constraint(raw: Any) -> Constraint:
    if type(raw) is not dict or not _CONSTRAINT_OTHERS.isdisjoint(raw):
        raise _Unusual
    requests = raw.get("requests", ())
    if type(requests) is list and all(type(r) is str for r in requests):
        requests = tuple(requests)
    elif requests != ():
        raise _Unusual
    return construct(
        Constraint,
        {
            "requests": requests,
            "match_attribute": _optional_text(raw.get("matchAttribute")),
            "distinct_attribute": _optional_text(raw.get("distinctAttribute")),
        },
    )


def _result(raw: Any) -> AllocationResult:
    if type(raw) is not dict or not _RESULT_OTHERS.isdisjoint(raw):
        raise _Unusual
    driver, pool, device = raw.get("driver"), raw.get("pool"), raw.get("device")
    if type(driver) is not str or type(pool) is not str or type(device) is not str:
        raise _Unusual
    admin = raw.get("adminAccess")
    if admin is not None and type(admin) is not bool:
        raise _Unusual
    consumed = raw.get("consumedCapacity", _NOTHING)
    return construct(
        AllocationResult,
        {
            "request": _field(raw, "request", ""),
            "driver": driver,
            "pool": pool,
            "device": device,
            "admin_access": bool(admin),
            "share_id": _optional_text(raw.get("shareID")),
            "consumed_capacity": _NOTHING if consumed is _NOTHING else as_str_map(consumed),
        },
    )


# The empty map of every result that consumed no capacity, shared like the models'
# defaults in construct (nothing changes what it reads).
_NOTHING: dict[str, str] = {}
# Claims' specs already read, by spec.devices as marshal writes it: equal bytes load
# back as equal values of equal types, so they read as equal models (equal values may
# be written differently, which only misses). Thousands of claims made from a few
# templates share a few specs; bounded, and large specs are not kept.
_SPECS: dict[bytes, tuple[tuple[Request, ...], tuple[Constraint, ...]]] = {}
_MOST_SPECS = 4096
_LONGEST_SPEC = 4096


def _spec(devices: dict[str, Any]) -> tuple[tuple[Request, ...], tuple[Constraint, ...]]:
    try:
        key = marshal.dumps(devices)
    except ValueError:  # a value marshal cannot write (a YAML timestamp): read it anew
        key = b""
    found = _SPECS.get(key) if key else None
    if found is None:
        found = (
            tuple([_request(r) for r in _list(devices.get("requests"))]),
            tuple([_constraint(c) for c in _list(devices.get("constraints"))]),
        )
        if key and len(key) <= _LONGEST_SPEC:
            if len(_SPECS) >= _MOST_SPECS:
                _SPECS.clear()
            _SPECS[key] = found
    return found


def read_claim_fast(obj: dict[str, Any]) -> ResourceClaim | None:
    """The claim, or None when it is not in the plain shape (the caller validates it)."""
    try:
        return _claim(obj)
    except _Unusual:
        return None


def _claim(obj: dict[str, Any]) -> ResourceClaim:
    meta = obj.get("metadata")
    if type(meta) is not dict:
        raise _Unusual
    devices = _map(_map(obj.get("spec")).get("devices"))
    status = _map(obj.get("status"))
    allocation = status.get("allocation")
    results = _list(_map(_map(allocation).get("devices")).get("results"))
    reserved = status.get("reservedFor")
    if reserved is not None and type(reserved) is not list:
        raise _Unusual
    requests, constraints = _spec(devices)
    return construct(
        ResourceClaim,
        {
            "uid": _text(meta.get("uid")),
            "namespace": _text(meta.get("namespace")),
            "name": _text(meta.get("name")),
            "requests": requests,
            "constraints": constraints,
            "results": tuple([_result(r) for r in results]),
            "allocated": allocation is not None,
            "reserved_for": reserved_for(status),
            "created": _text(meta.get("creationTimestamp")),
        },
    )


def read_claim(obj: dict[str, Any]) -> tuple[ResourceClaim | None, str | None]:
    """The claim and None; or, when it cannot be read, its allocated part (None if it has
    none) and why. Offline and in the operator a damaged claim keeps its devices taken."""
    fast = read_claim_fast(obj)
    if fast is not None:
        return fast, None
    try:
        return ResourceClaim.from_object(obj), None
    except READ_ERRORS as exc:
        return allocated_part(obj), error_text(exc)
