"""A device as CEL sees it: `device.driver`, `.attributes[domain]`, `.capacity[domain]`,
`.allowMultipleAllocations`.

Attribute and capacity names without a domain belong to the driver's domain. Looking up a
domain the device has nothing in gives an empty map, so `device.attributes['x.io'].a`
is a runtime error (missing key) while `'a' in device.attributes['x.io']` is false.
List-typed attributes are lists where the profile's CEL library reads them, and otherwise
make every selector on their device fail, as the scheduler's do.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from celpy import celtypes

from draview.api.attrvalues import ELEMENT, LISTS, PLAIN, SCALARS, PlainAttributes, typed
from draview.api.names import split_name
from draview.api.slices import Device
from draview.cel.values import CelQuantity, CelSemver, CelValueError


class DomainMap(celtypes.MapType):
    """A map keyed by domain whose missing keys read as an empty map."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType({})


# How CEL sees a list-typed attribute ({strings: [...]}), per profile (engine/rules.py:
# list_type_attributes, includes_function).
LISTS_EXPOSED = "exposed"  # a list value (1.36 with DRAListTypeAttributes, 1.37)
LISTS_REFUSED = "refused"  # an error for any selector on the device; includes() known (1.36)
LISTS_ABSENT = "absent"  # the same error, and no includes() at all (1.34, 1.35)


@dataclass(frozen=True, slots=True)
class DeviceInput:
    """What a selector can see of one device, and how it sees list attributes."""

    driver: str
    device: Device
    lists: str = LISTS_EXPOSED


class UnsupportedAttribute(CelValueError):
    """An attribute CEL cannot hold: the scheduler fails every selector on the device."""


def _scalar(kind: str, value: Any) -> Any:
    if kind == "string":
        return celtypes.StringType(value)
    if kind == "bool":
        return celtypes.BoolType(value)
    if kind == "int":
        return celtypes.IntType(value)
    return CelSemver.parse(value)  # version; CelValueError when it is no semver


def _attribute(name: str, raw: Any, lists: str) -> Any:
    """The CEL value of one attribute, as getAttributeValue (dynamic-resource-allocation
    cel/compile.go) builds it: a list only where the profile's library reads list values,
    an error for anything it cannot read."""
    kind, value = typed(raw)
    try:
        if kind in SCALARS or (kind in LISTS and lists == LISTS_EXPOSED):
            return _value(kind, value)
    except CelValueError as exc:
        raise UnsupportedAttribute(f"attribute {name}: {exc}") from None
    raise UnsupportedAttribute(f"attribute {name}: unsupported attribute value")


@lru_cache(maxsize=1 << 16)
def _value(kind: str, value: Any) -> Any:
    """One converted value, shared by every device that holds it (CEL values are never
    changed in place): a fleet's devices repeat most of their attributes."""
    if kind in SCALARS:
        return _scalar(kind, value)
    element = ELEMENT[kind]
    return celtypes.ListType([_scalar(element, v) for v in value])


@lru_cache(maxsize=1 << 14)
def _cel_key(name: str, driver: str) -> tuple[celtypes.StringType, celtypes.StringType]:
    domain, ident = split_name(name, driver)
    return celtypes.StringType(domain), celtypes.StringType(ident)


def _cel_map(items: dict[Any, Any]) -> celtypes.MapType:
    """celtypes.MapType(items) without its per-item Python loop: the keys are CEL
    strings already."""
    out = celtypes.MapType()
    dict.update(out, items)
    return out


def _by_domain(items: dict[str, Any], driver: str) -> DomainMap:
    grouped: dict[celtypes.StringType, dict[celtypes.StringType, Any]] = {}
    for name, value in items.items():
        if value is None:
            continue
        domain, ident = _cel_key(name, driver)
        grouped.setdefault(domain, {})[ident] = value
    out = DomainMap()
    dict.update(out, {d: _cel_map(vals) for d, vals in grouped.items()})
    return out


_ALWAYS = frozenset(PLAIN)


def check_attributes(inp: DeviceInput) -> None:
    """Raise what device_activation would raise for this device (the first attribute CEL
    cannot hold), without building the values: for a selector that reads nothing but
    `device.driver`, which fails on such a device all the same."""
    problem = attribute_problem(inp.device, inp.lists)
    if problem is not None:
        raise UnsupportedAttribute(problem)


def attribute_problem(device: Device, lists: str) -> str | None:
    """What check_attributes raises, as text, or None where every attribute converts."""
    if type(device.attributes) is PlainAttributes:
        return None
    for name, raw in device.attributes.items():
        if type(raw) is dict and len(raw) == 1:
            ((kind, value),) = raw.items()
            if PLAIN.get(kind) is type(value):
                continue  # a string, int or bool converts: most attributes, every device
        kind, value = typed(raw)
        if kind not in _ALWAYS:
            problem = _problem(
                name, kind, tuple(value) if isinstance(value, list) else value, lists
            )
            if problem is not None:
                return problem
    return None


@lru_cache(maxsize=4096)
def _problem(name: str, kind: str, value: Any, lists: str) -> str | None:
    """Why one attribute cannot be a CEL value, or None; remembered, since a driver
    gives thousands of devices the same versions."""
    raw = {kind: list(value) if isinstance(value, tuple) else value}
    try:
        _attribute(name, raw, lists)
    except UnsupportedAttribute as exc:
        return str(exc)
    return None


def driver_activation(driver: str) -> celtypes.MapType:
    """The `device` variable of a selector that reads only `device.driver`."""
    return celtypes.MapType({celtypes.StringType("driver"): celtypes.StringType(driver)})


_DRIVER = celtypes.StringType("driver")
_ATTRIBUTES = celtypes.StringType("attributes")
_CAPACITY = celtypes.StringType("capacity")
_MULTIPLE = celtypes.StringType("allowMultipleAllocations")


@lru_cache(maxsize=1 << 12)
def _quantity(text: str) -> CelQuantity | None:
    try:
        return CelQuantity.parse(text)
    except CelValueError:
        return None  # the pool is invalid anyway (InvalidQuantity)


def device_activation(inp: DeviceInput) -> celtypes.MapType:
    """The `device` variable; raises UnsupportedAttribute for an attribute CEL cannot
    hold (every attribute is converted, whichever the expression reads)."""
    dev = inp.device
    attributes = {name: _attribute(name, raw, inp.lists) for name, raw in dev.attributes.items()}
    capacity = {name: _quantity(cap.value) for name, cap in dev.capacity.items()}
    return _cel_map(
        {
            _DRIVER: celtypes.StringType(inp.driver),
            _ATTRIBUTES: _by_domain(attributes, inp.driver),
            _CAPACITY: _by_domain(capacity, inp.driver),
            _MULTIPLE: celtypes.BoolType(dev.allow_multiple_allocations),
        }
    )
