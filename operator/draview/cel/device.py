"""A device as CEL sees it: `device.driver`, `.attributes[domain]`, `.capacity[domain]`,
`.allowMultipleAllocations`.

Attribute and capacity names without a domain belong to the driver's domain. Looking up a
domain the device has nothing in gives an empty map, so `device.attributes['x.io'].a`
is a runtime error (missing key) while `'a' in device.attributes['x.io']` is false.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from celpy import celtypes

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


@dataclass(frozen=True, slots=True)
class DeviceInput:
    """What a selector can see of one device."""

    driver: str
    device: Device


def _attribute(raw: Any) -> Any:
    if isinstance(raw, dict):
        if "string" in raw:
            return celtypes.StringType(str(raw["string"]))
        if "bool" in raw:
            return celtypes.BoolType(bool(raw["bool"]))
        if "int" in raw:
            return celtypes.IntType(int(raw["int"]))
        if "version" in raw:
            try:
                return CelSemver.parse(str(raw["version"]))
            except CelValueError:
                return None
        return None
    if isinstance(raw, bool):
        return celtypes.BoolType(raw)
    if isinstance(raw, int):
        return celtypes.IntType(raw)
    if isinstance(raw, str):
        return celtypes.StringType(raw)
    return None


def _by_domain(items: dict[str, Any], driver: str) -> DomainMap:
    grouped: dict[str, dict[celtypes.StringType, Any]] = {}
    for name, value in items.items():
        if value is None:
            continue
        domain, ident = split_name(name, driver)
        grouped.setdefault(domain, {})[celtypes.StringType(ident)] = value
    return DomainMap(
        {celtypes.StringType(d): celtypes.MapType(vals) for d, vals in grouped.items()}
    )


def device_activation(inp: DeviceInput) -> celtypes.MapType:
    dev = inp.device
    attributes = {name: _attribute(raw) for name, raw in dev.attributes.items()}
    capacity: dict[str, Any] = {}
    for name, cap in dev.capacity.items():
        try:
            capacity[name] = CelQuantity.parse(cap.value)
        except CelValueError:
            capacity[name] = None  # the pool is invalid anyway (InvalidQuantity)
    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(inp.driver),
            celtypes.StringType("attributes"): _by_domain(attributes, inp.driver),
            celtypes.StringType("capacity"): _by_domain(capacity, inp.driver),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                dev.allow_multiple_allocations
            ),
        }
    )
