"""A derived attribute's CEL result as the attribute it stands for (DRADerivedAttributes).

A request's `derivedAttributes` (1.37 alpha) compute a virtual attribute per device that
the claim's constraints then read in place of a published one. The result must be what
an attribute can hold: a string, int, bool or semver, or a list of one of them (an empty
list is a list of strings). Anything else — a double, a map, a list that mixes types —
is an error, and the scheduler fails the claim on it, as valToDeviceAttribute in
dynamic-resource-allocation cel/compile.go (v0.37) does.
"""

from __future__ import annotations

from typing import Any

from celpy import celtypes

from draview.api.attrvalues import Typed
from draview.cel.values import CelSemver, CelValueError


def _one(value: Any) -> tuple[str, Any] | None:
    """(scalar kind, Python value) of one CEL value, None when no attribute holds it."""
    # cel-python's BoolType is an int and its UintType too; some of its string and
    # number operations return plain Python values.
    if isinstance(value, (celtypes.BoolType, bool)):
        return "bool", bool(value)
    if isinstance(value, celtypes.UintType):
        return None
    if isinstance(value, int):
        return "int", int(value)
    if isinstance(value, str):
        return "string", str(value)
    if isinstance(value, CelSemver):
        return "version", str(value)
    return None


def as_attribute(value: Any) -> Typed:
    """The attribute a derived expression's value makes; CelValueError when none."""
    one = _one(value)
    if one is not None:
        return one
    if not isinstance(value, celtypes.ListType):
        raise CelValueError(f"unsupported CEL return type: {type(value).__name__}")
    if not value:
        return "strings", ()
    first = _one(value[0])
    if first is None:
        raise CelValueError(f"unsupported list element type: {type(value[0]).__name__}")
    kind = first[0]
    items = []
    for i, element in enumerate(value):
        got = _one(element)
        if got is None or got[0] != kind:
            raise CelValueError(f"expected list element at index {i} to be {kind}")
        items.append(got[1])
    return kind + "s", tuple(items)
