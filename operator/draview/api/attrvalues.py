"""What a device attribute holds, as the allocator's Go types read it.

An attribute is written `{string: a}` (one value) or, with DRAListTypeAttributes (1.36+),
`{strings: [a, b]}` (a non-empty list; likewise ints, bools, versions). The models keep
what was written; this names its kind once for CEL, the constraints and the output.
"""

from __future__ import annotations

from typing import Any, Final

# kind -> the Python type of its value(s); a bool is no int here, as in the API.
SCALARS: Final[dict[str, type]] = {"string": str, "int": int, "bool": bool, "version": str}
LISTS: Final[dict[str, type]] = {"strings": str, "ints": int, "bools": bool, "versions": str}
# A list kind -> the scalar kind of its elements.
ELEMENT: Final[dict[str, str]] = {
    "strings": "string",
    "ints": "int",
    "bools": "bool",
    "versions": "version",
}

# Kinds whose value converts to CEL whatever it is (a version's may not), by their value's
# type.
PLAIN: Final[dict[str, type]] = {"string": str, "bool": bool, "int": int}


class PlainAttributes(dict[str, Any]):
    """A device's attributes when every one is written `{kind: value}` with a PLAIN kind
    and a value of its type (most devices): the fast reader says so as it reads them, so
    that CEL's first look at a device need not go over all of them again. Equal to the
    dict it holds; any other reader's maps are plain dicts, judged attribute by
    attribute."""

    __slots__ = ()


# (kind, value): ("string", "a"), ("strings", ("a", "b")); NONE for an attribute that holds
# no value of a kind the API knows (the Go types leave every field nil).
Typed = tuple[str, Any]
NONE: Final[Typed] = ("", None)


def typed(raw: Any) -> Typed:
    """The kind and value of an attribute as written (a bare scalar, as the KEP drafts
    write one, is its own kind)."""
    if isinstance(raw, dict):
        if len(raw) != 1:
            return NONE  # none or several values: the API server refuses either
        ((kind, value),) = raw.items()
        scalar = SCALARS.get(kind)
        if scalar is not None:
            return (kind, value) if type(value) is scalar else NONE
        element = LISTS.get(kind)
        ok = element is not None and isinstance(value, (list, tuple)) and bool(value)
        if ok and all(type(v) is element for v in value):
            return (kind, tuple(value))
        return NONE
    if type(raw) in (str, int, bool):
        return ({str: "string", int: "int", bool: "bool"}[type(raw)], raw)
    return NONE


def text(raw: Any) -> str:
    """One attribute value for people: `a`, `[a, b]`, `<invalid>`."""
    kind, value = typed(raw)
    if not kind:
        return "<invalid>"
    if kind in LISTS:
        return "[" + ", ".join(_one(v) for v in value) + "]"
    return _one(value)


def _one(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)
