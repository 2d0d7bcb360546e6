"""What of a device a selector reads, when it reads it only through fixed paths, and a
key of those values: devices that agree on it get the same result, so a fleet of devices
that differ only in what the selector does not look at (serial numbers, indexes) is
evaluated once, not once per device.

A path is `device.driver`, `device.allowMultipleAllocations`, or an attribute or capacity
domain and name written as string literals: `device.attributes['d.io'].model`,
`device.attributes['d.io']['model']`, `'model' in device.attributes['d.io']`, the same
under `capacity`. A domain used as a whole (`device.attributes['d.io'].exists(...)`,
`size(...)`) reads every name in it. Any other use of `device` (a name chosen at run
time, the attributes map itself, a macro variable named `device`) and the expression is
evaluated on every device, as before. Reading a field of a value at a path (`.x` of a
string) depends on that value alone, so a path is cut at the name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import lark

from draview.api.attrvalues import PLAIN, PlainAttributes, typed
from draview.api.names import split_name
from draview.api.slices import Device

Path = tuple[str, ...]
Reads = frozenset[Path]

# Nodes that only wrap one operand in cel-python's grammar.
_WRAPPERS = frozenset(
    {
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
        "primary",
    }
)
# A string literal without escapes, in either quote: anything else is not taken as a path.
_PLAIN_STRING = re.compile(r"""^(?:"([^"\\\n]*)"|'([^'\\\n]*)')$""")
_SCALAR_FIELDS = frozenset({"driver", "allowMultipleAllocations"})
_MAPS = frozenset({"attributes", "capacity"})
_ABSENT = ("absent",)


class _Unknown(Exception):
    """`device` is used in a way no path describes."""


def _unwrap(node: Any) -> Any:
    while isinstance(node, lark.Tree) and node.data in _WRAPPERS and len(node.children) == 1:
        node = node.children[0]
    return node


def _string(node: Any) -> str | None:
    node = _unwrap(node)
    if isinstance(node, lark.Tree) and node.data == "literal" and node.children:
        match = _PLAIN_STRING.match(str(node.children[0]))
        if match:
            return match.group(1) if match.group(1) is not None else match.group(2)
    return None


def _is_device(node: Any) -> bool:
    node = _unwrap(node)
    return (
        isinstance(node, lark.Tree)
        and node.data == "ident"
        and bool(node.children)
        and str(node.children[0]) == "device"
    )


def _path(node: Any) -> Path | None:
    """The path a member chain rooted at `device` names, or None when `node` is not one."""
    if not isinstance(node, lark.Tree):
        return None
    if node.data == "member_dot" and len(node.children) == 2:
        inner, name = node.children
        if _is_device(inner):
            return (str(name),)
        base = _path(_unwrap(inner))
        return None if base is None else (*base, str(name))
    if node.data == "member_index" and len(node.children) == 2:
        inner, index = node.children
        base = _path(_unwrap(inner))
        key = _string(index)
        if base is None:
            return None
        if key is None:
            raise _Unknown  # a name chosen at run time
        return (*base, key)
    return None


def _record(path: Path, out: set[Path]) -> None:
    if path[0] in _SCALAR_FIELDS:
        out.add(path[:1])
    elif path[0] in _MAPS and len(path) >= 2:
        out.add(path[:3])
    else:
        raise _Unknown  # the attributes map itself, or a field devices do not have


def _visit(node: Any, out: set[Path]) -> None:
    if not isinstance(node, lark.Tree):
        return
    operator = node.children[0] if node.data == "relation" and len(node.children) == 2 else None
    if isinstance(operator, lark.Tree) and operator.data == "relation_in" and operator.children:
        # 'name' in device.attributes['d.io'] (relation(relation_in(name), map)): whether
        # that one name is there.
        name, domain = _string(operator.children[0]), _path(_unwrap(node.children[1]))
        if name is not None and domain is not None and len(domain) == 2:
            _record((*domain, name), out)
            return
    path = _path(node)
    if path is not None:
        _record(path, out)
        return
    if _is_device(node):
        raise _Unknown
    for child in node.children:
        _visit(child, out)


def reads(tree: lark.Tree[Any]) -> Reads | None:
    """The paths the expression reads (see the module docstring), or None when it uses
    `device` some other way."""
    out: set[Path] = set()
    try:
        _visit(tree, out)
    except _Unknown:
        return None
    return frozenset(out)


def _by_domain(values: Mapping[str, Any], driver: str) -> dict[str, dict[str, Any]]:
    # As the activation groups them (cel/device.py): a later name for the same domain and
    # name replaces an earlier one.
    out: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        domain, ident = split_name(name, driver)
        out.setdefault(domain, {})[ident] = value
    return out


def _attribute(raw: Any) -> Any:
    return typed(raw) if raw is not None else _ABSENT


_NOT_ONE = object()


def _names(domain: str, ident: str, driver: str) -> tuple[str, ...]:
    """The names that _by_domain files under (domain, ident): qualified, and where the
    domain is the driver's, bare (or with an empty domain)."""
    if not domain or "/" in ident:
        return ()  # no name splits into these
    full = f"{domain}/{ident}"
    return (full, ident, f"/{ident}") if domain == driver else (full,)


@functools.lru_cache(maxsize=1024)
def _plan(paths: Reads, driver: str) -> tuple[tuple[Path, tuple[str, ...] | None], ...]:
    """The paths in sorted order, each with, for one attribute by name, the names it may
    be written as (else None): looked up directly rather than grouping every attribute
    of the device by domain."""
    return tuple(
        (p, _names(p[1], p[2], driver) if p[0] == "attributes" and len(p) == 3 else None)
        for p in sorted(paths)
    )


def _by_name(plan: tuple[tuple[Path, tuple[str, ...] | None], ...]) -> bool:
    """Whether the plan reads the driver and attributes by name alone (most selectors)."""
    return all(spelled is not None or path == ("driver",) for path, spelled in plan)


def _one_of(values: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    """The value under the one of `names` that `values` holds, _ABSENT for none, and
    _NOT_ONE for several (then their order decides: _by_domain keeps the last)."""
    held = [name for name in names if name in values]
    if len(held) > 1:
        return _NOT_ONE
    return _attribute(values[held[0]]) if held else _ABSENT


def content_key(paths: Reads, driver: str, device: Device, lists: str) -> tuple[Any, ...]:
    """The values at `paths` on the device: equal keys, equal results (with the same
    `lists`, which decides how list attributes read)."""
    parts: list[Any] = [lists]
    attributes: dict[str, dict[str, Any]] | None = None
    capacity: dict[str, dict[str, Any]] | None = None
    for path, spelled in _plan(paths, driver):
        head = path[0]
        if spelled is not None:
            value = _one_of(device.attributes, spelled)
            if value is not _NOT_ONE:
                parts.append(value)
                continue
        if head == "driver":
            parts.append(driver)
        elif head == "allowMultipleAllocations":
            parts.append(device.allow_multiple_allocations)
        elif head == "attributes":
            if attributes is None:
                attributes = _by_domain(device.attributes, driver)
            names = attributes.get(path[1], {})
            if len(path) == 2:
                parts.append(tuple(sorted((n, _attribute(v)) for n, v in names.items())))
            else:
                parts.append(_attribute(names.get(path[2])))
        else:
            if capacity is None:
                capacity = _by_domain({n: c.value for n, c in device.capacity.items()}, driver)
            quantities = capacity.get(path[1], {})
            if len(path) == 2:
                parts.append(tuple(sorted(quantities.items())))
            else:
                parts.append(quantities.get(path[2], _ABSENT))
    return tuple(parts)


Keyer = Callable[[Device], tuple[Any, ...]]


def keyer(paths: Reads, driver: str, lists: str) -> Keyer:
    """content_key for one driver and `lists`, its plan looked at once: for paths that
    are the driver and attributes by name (most selectors), each device costs a lookup
    per name it may be written as."""
    plan = _plan(paths, driver)
    if not _by_name(plan):
        return functools.partial(_general_key, paths, driver, lists)
    names = tuple(spelled for _, spelled in plan)  # None: the driver

    def key(device: Device) -> tuple[Any, ...]:
        attributes = device.attributes
        parts: list[Any] = [lists]
        for spelled in names:
            if spelled is None:
                parts.append(driver)
                continue
            value = _one_of(attributes, spelled)
            if value is _NOT_ONE:
                return content_key(paths, driver, device, lists)  # _by_domain's order decides
            parts.append(value)
        return tuple(parts)

    return key


def plain_keyer(
    paths: Reads, driver: str, lists: str
) -> Callable[[Device], tuple[Any, ...] | None]:
    """For a plan `keyer` reads name by name: the key it gives, with one pass over the
    device's attributes that also answers the convertibility check (device.py's
    attribute_problem), for a device whose attributes are all plain strings, ints and
    bools (most) and that writes no name read here two ways; None for any other device
    (then the check and `keyer` decide), and for every device under any other plan.
    Attributes the reader marked plain (PlainAttributes) cost a lookup per name read."""
    plan = _plan(paths, driver)
    if not _by_name(plan):
        return _none
    slot: dict[str, int] = {}
    start: list[Any] = [lists]
    for i, (_, spelled) in enumerate(plan, start=1):
        start.append(driver if spelled is None else _ABSENT)
        for name in spelled or ():
            slot[name] = i
    read = tuple(slot.items())

    def key(device: Device) -> tuple[Any, ...] | None:
        parts = start.copy()
        attributes = device.attributes
        if type(attributes) is PlainAttributes:
            # Every attribute is plain (the reader checked): only the names read matter.
            for name, at in read:
                raw = attributes.get(name)
                if raw is not None:
                    if parts[at] is not _ABSENT:
                        return None  # written two ways: the order decides (_one_of)
                    ((kind, value),) = raw.items()
                    parts[at] = (kind, value)
            return tuple(parts)
        for name, raw in attributes.items():
            if type(raw) is not dict or len(raw) != 1:
                return None
            ((kind, value),) = raw.items()
            if PLAIN.get(kind) is not type(value):
                return None
            i = slot.get(name)
            if i is not None:
                if parts[i] is not _ABSENT:
                    return None  # written two ways: the order decides (_one_of)
                parts[i] = (kind, value)
        return tuple(parts)

    return key


def _none(device: Device) -> None:
    return None


def _general_key(paths: Reads, driver: str, lists: str, device: Device) -> tuple[Any, ...]:
    return content_key(paths, driver, device, lists)
