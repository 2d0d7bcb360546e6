"""Equality, `in` and includes() as cel-go has them, for cel-python.

Attribute values are dynamically typed, so a selector can compare values of different
types, and list-typed attributes (DRAListTypeAttributes) make that common: `'a' in
device.attributes['x.io'].cores` where cores is a list of ints. cel-go (the scheduler's
CEL) answers false where the types differ — a value's Equal is false for another type —
while cel-python raises "no such overload". Where cel-go does raise (Kubernetes' semver
and quantity values compared with another type, `in` on a string) so does this.
Checked against the scheduler's own CEL library (dynamic-resource-allocation cel,
DeviceMatches) expression by expression; see tests/unit/test_cel_lists.py.
"""

from __future__ import annotations

import math
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from draview.cel.values import CelQuantity, CelSemver

_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def _plain(v: Any) -> int | float:
    # cel-python's own number types refuse to compare across types.
    return float(v) if isinstance(v, float) else int(v)


def _null(v: Any) -> bool:
    return v is None or isinstance(v, celtypes.NullType)


def equal(a: Any, b: Any) -> bool:
    """`a.Equal(b)` in cel-go; TypeError where it is "no such overload"."""
    if _null(a) or _null(b):
        return _null(a) and _null(b)
    if isinstance(a, (CelQuantity, CelSemver)):
        return bool(a == b)  # their own Equal refuses another type
    if isinstance(a, celtypes.BoolType):
        return isinstance(b, celtypes.BoolType) and bool(a) == bool(b)
    if isinstance(a, _NUMBERS):
        if isinstance(b, celtypes.BoolType) or not isinstance(b, _NUMBERS):
            return False
        x, y = _plain(a), _plain(b)
        if (isinstance(x, float) and math.isnan(x)) or (isinstance(y, float) and math.isnan(y)):
            return False
        return x == y  # Python compares ints and floats exactly, as cel-go does
    if isinstance(a, (celtypes.StringType, celtypes.BytesType)):
        return type(a) is type(b) and bool(a == b)
    if isinstance(a, celtypes.ListType):
        return isinstance(b, celtypes.ListType) and _lists_equal(a, b)
    if isinstance(a, celtypes.MapType):
        return isinstance(b, celtypes.MapType) and _maps_equal(a, b)
    return bool(a == b)


def _loose(a: Any, b: Any) -> bool:
    """An element's equality inside a list or map: cel-go stops only at a plain false,
    so an element whose comparison is an error does not make the containers differ."""
    try:
        return equal(a, b)
    except TypeError:
        return True


def _lists_equal(a: celtypes.ListType, b: celtypes.ListType) -> bool:
    return len(a) == len(b) and all(_loose(x, y) for x, y in zip(a, b, strict=True))


def _maps_equal(a: celtypes.MapType, b: celtypes.MapType) -> bool:
    if len(a) != len(b):
        return False
    return all(key in b and _loose(value, b[key]) for key, value in a.items())


def _error(*values: Any) -> CELEvalError | None:
    return next((v for v in values if isinstance(v, CELEvalError)), None)


def op_eq(a: Any, b: Any) -> Any:
    return _error(a, b) or celtypes.BoolType(equal(a, b))


def op_ne(a: Any, b: Any) -> Any:
    return _error(a, b) or celtypes.BoolType(not equal(a, b))


def _contains(items: Any, item: Any) -> bool:
    """Whether some element equals `item`; an element of another type is not it."""
    for element in items:
        try:
            if equal(item, element):
                return True
        except TypeError:
            continue
    return False


def op_in(item: Any, container: Any) -> Any:
    """`item in container`: lists by element, maps by key, nothing else (a string is no
    container in CEL)."""
    err = _error(item, container)
    if err is not None:
        return err
    if isinstance(container, celtypes.ListType):
        return celtypes.BoolType(_contains(container, item))
    if isinstance(container, celtypes.MapType):
        return celtypes.BoolType(item in container)
    raise TypeError(f"no such overload: in {type(container).__name__}")


def includes(target: Any, arg: Any) -> Any:
    """`target.includes(arg)` (Kubernetes' list library, DRAListTypeAttributes): a list
    holds an element equal to arg, or a single value equals it; never an error."""
    err = _error(target, arg)
    if err is not None:
        return err
    if isinstance(target, celtypes.ListType):
        for element in target:
            try:
                if equal(element, arg):
                    return celtypes.BoolType(True)
            except TypeError:
                continue
        return celtypes.BoolType(False)
    try:
        return celtypes.BoolType(equal(target, arg))
    except TypeError:
        return celtypes.BoolType(False)
