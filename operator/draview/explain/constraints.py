"""A claim's matchAttribute and distinctAttribute constraints as the allocator keeps them.

Each constraint is told of every device the search takes (`add`) and gives back
(`remove`, in reverse order). What it compares depends on the profile (engine/rules.py):

- values: one to one (a list never matches another device), or, with
  `list_constraints` (Features.ListTypeAttributes), as sets: matchAttribute keeps the
  intersection of what the devices hold and fails once it is empty; distinctAttribute
  wants each device's set disjoint from the others'. A single value is a set of one; sets
  of different kinds share nothing.
- distinctAttribute's memory: until 1.36 one value per request name (the last device of
  that request), from 1.37 (`distinct_every_device`) every device taken.
- the attribute: a request's derived attribute of that name (`derived_attributes`,
  evaluated with CEL on the device; an error aborts the attempt), else the device's own.

Ported from structured/internal/{incubating,experimental} (constraint.go,
matchAttributeConstraint in allocator_*.go) of v0.36 and v0.37.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from draview.api.attrvalues import ELEMENT, LISTS, NONE, SCALARS, Typed, typed
from draview.api.claims import Constraint
from draview.api.slices import Device
from draview.cel import (
    LISTS_ABSENT,
    LISTS_EXPOSED,
    LISTS_REFUSED,
    CelCompileError,
    CelEngine,
    CelRuntimeError,
    DeviceInput,
)
from draview.engine.rules import Rules
from draview.explain.gather import SearchDevice

# (element kind, values): what attributeAsSet makes of a value
ValueSet = tuple[str, frozenset[Any]]


class ConstraintError(Exception):
    """What aborts the scheduling attempt (a derived attribute that cannot be evaluated,
    a constraint of no known kind); the search turns it into its SearchError."""


def list_mode(rules: Rules) -> str:
    """How the profile's CEL sees list-typed attributes (cel/device.py)."""
    if rules.list_type_attributes:
        return LISTS_EXPOSED
    return LISTS_REFUSED if rules.includes_function else LISTS_ABSENT


def as_set(t: Typed) -> ValueSet | None:
    kind, value = t
    if kind in SCALARS:
        return kind, frozenset((value,))
    if kind in LISTS and value:
        return ELEMENT[kind], frozenset(value)
    return None  # no value, or an empty list (only a derived attribute makes one)


def _common(a: ValueSet, b: ValueSet) -> ValueSet | None:
    if a[0] != b[0]:
        return None
    shared = a[1] & b[1]
    return (a[0], shared) if shared else None


def static_value(device: Device, driver: str, name: str) -> Typed | None:
    """The device's own attribute `name` (fully qualified): under that name, or under
    its identifier alone when the domain is the device's driver; None when it has none."""
    attrs = device.attributes
    if name in attrs:
        return typed(attrs[name])
    domain, sep, ident = name.partition("/")
    if not sep or domain != driver or ident not in attrs:
        return None
    return typed(attrs[ident])


@dataclass(slots=True)
class Attributes:
    """Looks an attribute up for one request and device: the request's derived attribute
    of that name when the profile evaluates them, else the device's own."""

    cel: CelEngine
    rules: Rules

    def value(self, derived: Mapping[str, str], d: SearchDevice, name: str) -> Typed | None:
        return self.of(derived, d.device, d.driver, name, d.cel_key)

    def of(
        self, derived: Mapping[str, str], device: Device, driver: str, name: str, key: Hashable
    ) -> Typed | None:
        expression = derived.get(name) if self.rules.derived_attributes else None
        if expression is None:
            return static_value(device, driver, name)
        inp = DeviceInput(driver, device, list_mode(self.rules))
        try:
            result = self.cel.derive(expression, inp, key)
        except CelCompileError as exc:
            raise ConstraintError(f"compile derived attribute {name} failed: {exc}") from exc
        if isinstance(result, CelRuntimeError):
            raise ConstraintError(
                f"evaluate derived attribute {name} on device {driver}/{device.name} "
                f"failed: {result}"
            )
        return result

    def offered(
        self, derived: Mapping[str, str], device: Device, driver: str, name: str, key: Hashable
    ) -> frozenset[Any]:
        """For explanations: the values a device offers a constraint — its single value,
        or the elements of its list where the profile compares sets — none when it has
        none or its derived attribute fails."""
        try:
            value = self.of(derived, device, driver, name, key)
        except ConstraintError:
            return frozenset()
        if value is None:
            return frozenset()
        if value[0] in SCALARS:
            return frozenset((value[1],))
        found = as_set(value) if self.rules.list_constraints else None
        return found[1] if found else frozenset()


class Taker(Protocol):
    """What a constraint needs of the request a device is taken for."""

    @property
    def base(self) -> str: ...  # the request, or the parent of a subrequest

    @property
    def sub(self) -> str: ...  # the subrequest's name, "" for a plain request

    @property
    def derived(self) -> Mapping[str, str]: ...  # derived attribute name -> expression


Lookup = Callable[[Mapping[str, str], SearchDevice, str], "Typed | None"]


@dataclass(slots=True)
class AttributeConstraint:
    names: frozenset[str]
    attribute: str
    lookup: Lookup
    sets: bool  # rules.list_constraints

    def applies(self, base: str, sub: str) -> bool:
        if not self.names:
            return True
        return base in self.names or (bool(sub) and f"{base}/{sub}" in self.names)

    def value(self, taker: Taker, d: SearchDevice) -> Typed | None:
        return self.lookup(taker.derived, d, self.attribute)


@dataclass(slots=True)
class MatchAttribute(AttributeConstraint):
    first: Typed = NONE
    count: int = 0
    # with sets: the intersection after each device taken
    stack: list[ValueSet] = field(default_factory=list)

    def add(self, taker: Taker, d: SearchDevice) -> bool:
        if not self.applies(taker.base, taker.sub):
            return True
        value = self.value(taker, d)
        if value is None:
            return False
        if self.sets:
            new = as_set(value)
            if new is None:
                return False
            if self.count:
                narrowed = _common(self.stack[-1], new)
                if narrowed is None:
                    return False
                new = narrowed
            self.stack.append(new)
        elif not self.count:
            self.first = value  # the first device may hold anything, a list too
        elif value[0] not in SCALARS or value != self.first:
            return False
        self.count += 1
        return True

    def remove(self, taker: Taker) -> None:
        if not self.applies(taker.base, taker.sub):
            return
        self.count -= 1
        if self.sets:
            self.stack.pop()


@dataclass(slots=True)
class DistinctAttribute(AttributeConstraint):
    every_device: bool  # rules.distinct_every_device
    # 1.34 compares the values' pointers (rules.distinct_by_value off): only the same
    # device taken again repeats a value.
    by_device: bool = False
    taken: list[Typed] = field(default_factory=list)  # from 1.37
    by_request: dict[str, Typed] = field(default_factory=dict)  # until 1.36
    on_request: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # 1.34
    count: int = 0

    def add(self, taker: Taker, d: SearchDevice) -> bool:
        if not self.applies(taker.base, taker.sub):
            return True
        value = self.value(taker, d)
        if value is None:
            return False
        if self.every_device:
            if not self._distinct(value, self.taken):
                return False
            self.taken.append(value)
        else:
            # Until 1.36 the first device is taken unchecked.
            if self.count and not self._apart(value, d):
                return False
            self.by_request[taker.base] = value
            self.on_request[taker.base] = d.id
        self.count += 1
        return True

    def _apart(self, value: Typed, d: SearchDevice) -> bool:
        if self.by_device:
            return value[0] in SCALARS and d.id not in self.on_request.values()
        return self._distinct(value, list(self.by_request.values()))

    def _distinct(self, value: Typed, others: list[Typed]) -> bool:
        if self.sets:
            new = as_set(value)
            if new is None:
                return False
            return all((o := as_set(t)) is None or _common(new, o) is None for t in others)
        if not others:
            return True
        # One to one: a value that is no scalar never passes against another device.
        return value[0] in SCALARS and all(t != value for t in others)

    def remove(self, taker: Taker) -> None:
        if not self.applies(taker.base, taker.sub):
            return
        self.count -= 1
        if self.every_device:
            self.taken.pop()
        else:
            self.by_request.pop(taker.base, None)
            self.on_request.pop(taker.base, None)


def make(c: Constraint, rules: Rules, lookup: Lookup) -> MatchAttribute | DistinctAttribute:
    names = frozenset(c.requests)
    if c.match_attribute:
        return MatchAttribute(names, c.match_attribute, lookup, rules.list_constraints)
    if c.distinct_attribute:
        return DistinctAttribute(
            names,
            c.distinct_attribute,
            lookup,
            rules.list_constraints,
            rules.distinct_every_device,
            not rules.distinct_by_value,
        )
    raise ConstraintError("empty constraint (unsupported constraint type?)")
