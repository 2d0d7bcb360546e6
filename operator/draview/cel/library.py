"""The functions of the Kubernetes CEL environment DRA selectors use, for cel-python.

cel-python calls a method `x.f(a)` as the function `f(x, a)`, so one table holds both
global functions (quantity(), semver()) and methods. A ValueError or TypeError raised
here becomes a CEL runtime error, as a bad argument is in Kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from celpy import celtypes

from draview.cel.equality import includes, op_eq, op_in, op_ne
from draview.cel.values import CelQuantity, CelSemver, CelValueError

Fn = Callable[..., Any]


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return str(v)


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an int, got {type(v).__name__}")
    return int(v)


# -- quantity ---------------------------------------------------------------------------


def _quantity(text: Any) -> CelQuantity:
    return CelQuantity.parse(_str(text))


def _is_quantity(text: Any) -> celtypes.BoolType:
    try:
        CelQuantity.parse(_str(text))
    except CelValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _as_q(v: Any) -> CelQuantity:
    if isinstance(v, CelQuantity):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return CelQuantity.parse(str(int(v)))
    raise TypeError(f"expected a quantity, got {type(v).__name__}")


def _add(a: Any, b: Any) -> CelQuantity:
    if not isinstance(a, CelQuantity):
        raise TypeError("add() is a quantity method")
    return CelQuantity(a.q + _as_q(b).q)


def _sub(a: Any, b: Any) -> CelQuantity:
    if not isinstance(a, CelQuantity):
        raise TypeError("sub() is a quantity method")
    return CelQuantity(a.q - _as_q(b).q)


def _quantity_only(name: str, a: Any) -> CelQuantity:
    if not isinstance(a, CelQuantity):
        raise TypeError(f"{name}() is a quantity method")
    return a


def _as_integer(a: Any) -> celtypes.IntType:
    return celtypes.IntType(_quantity_only("asInteger", a).as_integer())


def _as_float(a: Any) -> celtypes.DoubleType:
    return celtypes.DoubleType(_quantity_only("asApproximateFloat", a).as_float())


def _is_integer(a: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_quantity_only("isInteger", a).is_integer())


# -- semver -----------------------------------------------------------------------------


def _semver(text: Any) -> CelSemver:
    return CelSemver.parse(_str(text))


def _is_semver(text: Any) -> celtypes.BoolType:
    try:
        CelSemver.parse(_str(text))
    except CelValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _semver_part(name: str) -> Fn:
    def part(v: Any) -> celtypes.IntType:
        if not isinstance(v, CelSemver):
            raise TypeError(f"{name}() is a semver method")
        return celtypes.IntType(getattr(v, name))

    return part


# -- shared by quantity and semver --------------------------------------------------------


def _cmp(a: Any, b: Any) -> int:
    if isinstance(a, CelQuantity) and isinstance(b, CelQuantity):
        return a.cmp(b)
    if isinstance(a, CelSemver) and isinstance(b, CelSemver):
        return a.cmp(b)
    raise TypeError(f"cannot compare {type(a).__name__} with {type(b).__name__}")


def _compare_to(a: Any, b: Any) -> celtypes.IntType:
    return celtypes.IntType(_cmp(a, b))


def _greater(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_cmp(a, b) > 0)


def _less(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_cmp(a, b) < 0)


# -- strings (cel-go ext.Strings) ----------------------------------------------------------


def _lower(s: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.lower() if c.isascii() else c for c in _str(s)))


def _upper(s: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.upper() if c.isascii() else c for c in _str(s)))


def _split(s: Any, sep: Any, limit: Any = None) -> celtypes.ListType:
    text, separator = _str(s), _str(sep)
    n = -1 if limit is None else _int(limit)
    if n == 0:
        return celtypes.ListType([])
    if separator == "":
        parts = list(text)
        if n > 0 and len(parts) > n:
            parts = [*parts[: n - 1], "".join(parts[n - 1 :])]
    else:
        parts = text.split(separator) if n < 0 else text.split(separator, n - 1)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _replace(s: Any, old: Any, new: Any, limit: Any = None) -> celtypes.StringType:
    n = -1 if limit is None else _int(limit)
    return celtypes.StringType(_str(s).replace(_str(old), _str(new), n))


def _index_of(s: Any, sub: Any, start: Any = None) -> celtypes.IntType:
    if isinstance(s, list):
        for i, item in enumerate(s):
            if item == sub:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    text, part = _str(s), _str(sub)
    offset = 0 if start is None else _int(start)
    if not 0 <= offset <= len(text):
        raise CelValueError(f"index out of range: {offset}")
    return celtypes.IntType(text.find(part, offset))


def _last_index_of(s: Any, sub: Any, end: Any = None) -> celtypes.IntType:
    if isinstance(s, list):
        for i in range(len(s) - 1, -1, -1):
            if s[i] == sub:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    text, part = _str(s), _str(sub)
    if end is None:
        return celtypes.IntType(text.rfind(part))
    offset = _int(end)
    if not 0 <= offset < max(len(text), 1):
        raise CelValueError(f"index out of range: {offset}")
    return celtypes.IntType(text.rfind(part, 0, offset + len(part)))


def _substring(s: Any, start: Any, end: Any = None) -> celtypes.StringType:
    text = _str(s)
    a = _int(start)
    b = len(text) if end is None else _int(end)
    if not 0 <= a <= b <= len(text):
        raise CelValueError(f"substring out of range: [{a}:{b}] of length {len(text)}")
    return celtypes.StringType(text[a:b])


def _char_at(s: Any, i: Any) -> celtypes.StringType:
    text, idx = _str(s), _int(i)
    if not 0 <= idx <= len(text):
        raise CelValueError(f"index out of range: {idx}")
    return celtypes.StringType(text[idx : idx + 1])


def _trim(s: Any) -> celtypes.StringType:
    return celtypes.StringType(_str(s).strip())


def _join(items: Any, sep: Any = None) -> celtypes.StringType:
    if not isinstance(items, list):
        raise TypeError("join() is a list method")
    return celtypes.StringType(("" if sep is None else _str(sep)).join(_str(x) for x in items))


# -- lists and regex (Kubernetes library) ----------------------------------------------------


def _list(v: Any, name: str) -> list[Any]:
    if not isinstance(v, list):
        raise TypeError(f"{name}() is a list method")
    return list(v)


def _is_sorted(v: Any) -> celtypes.BoolType:
    items = _list(v, "isSorted")
    return celtypes.BoolType(all(items[i] <= items[i + 1] for i in range(len(items) - 1)))


def _sum(v: Any) -> Any:
    items = _list(v, "sum")
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for x in items[1:]:
        total = total + x
    return total


def _min(v: Any) -> Any:
    items = _list(v, "min")
    if not items:
        raise CelValueError("min() of an empty list")
    return min(items)


def _max(v: Any) -> Any:
    items = _list(v, "max")
    if not items:
        raise CelValueError("max() of an empty list")
    return max(items)


def _find(s: Any, pattern: Any) -> celtypes.StringType:
    m = re.search(_str(pattern), _str(s))
    return celtypes.StringType(m.group(0) if m else "")


def _find_all(s: Any, pattern: Any, limit: Any = None) -> celtypes.ListType:
    found = [m.group(0) for m in re.finditer(_str(pattern), _str(s))]
    if limit is not None and _int(limit) >= 0:
        found = found[: _int(limit)]
    return celtypes.ListType([celtypes.StringType(x) for x in found])


FUNCTIONS: dict[str, Fn] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "add": _add,
    "sub": _sub,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_float,
    "isInteger": _is_integer,
    "semver": _semver,
    "isSemver": _is_semver,
    "major": _semver_part("major"),
    "minor": _semver_part("minor"),
    "patch": _semver_part("patch"),
    "compareTo": _compare_to,
    "isGreaterThan": _greater,
    "isLessThan": _less,
    "lowerAscii": _lower,
    "upperAscii": _upper,
    "split": _split,
    "replace": _replace,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "substring": _substring,
    "charAt": _char_at,
    "trim": _trim,
    "join": _join,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _min,
    "max": _max,
    "find": _find,
    "findAll": _find_all,
    # Kubernetes' list library and DRAListTypeAttributes (1.36+; cel/env.py keeps it from
    # the releases without it).
    "includes": includes,
    # cel-go's equality: values of different types are unequal, not an error.
    "_==_": op_eq,
    "_!=_": op_ne,
    "_in_": op_in,
}

# Names cel-python provides itself, and macros; together with FUNCTIONS everything a
# selector may call. Anything else is rejected at compile time, as the API server does.
BUILTINS = frozenset(
    {
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "has",
        "all",
        "exists",
        "exists_one",
        "map",
        "filter",
        "int",
        "uint",
        "double",
        "string",
        "bool",
        "bytes",
        "type",
        "dyn",
        "duration",
        "timestamp",
    }
)
