"""CEL value types of the Kubernetes library: Quantity and Semver.

Both are immutable and compare by value. Kubernetes does not give them the `<` operators:
expressions use compareTo/isGreaterThan/isLessThan, so the ordering operators raise
TypeError here, which CEL reports as "no such overload" like the API server would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from draview.quantity import Quantity, QuantityError, parse_quantity


class CelValueError(ValueError):
    """A value a CEL library function cannot accept (bad quantity or version text)."""


@dataclass(frozen=True, slots=True, eq=False)
class CelQuantity:
    q: Quantity

    @classmethod
    def parse(cls, text: str) -> CelQuantity:
        try:
            return cls(parse_quantity(str(text)))
        except QuantityError as exc:
            raise CelValueError(str(exc)) from None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CelQuantity):
            raise TypeError("no such overload: quantity == other type")
        return self.q == other.q

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.q)

    def __lt__(self, other: object) -> bool:
        raise TypeError("quantities have no < operator; use isLessThan")

    __gt__ = __le__ = __ge__ = __lt__

    def cmp(self, other: CelQuantity) -> int:
        return (self.q > other.q) - (self.q < other.q)

    def is_integer(self) -> bool:
        return self.q.nanos % 10**9 == 0

    def as_integer(self) -> int:
        if not self.is_integer():
            raise CelValueError(f"cannot convert value to integer: {self.q}")
        value = self.q.nanos // 10**9
        if not -(2**63) <= value < 2**63:
            raise CelValueError(f"cannot convert value to integer: {self.q} overflows int64")
        return value

    def as_float(self) -> float:
        return float(Fraction(self.q.nanos, 10**9))

    def __str__(self) -> str:
        return str(self.q)

    def __repr__(self) -> str:
        return f"quantity({str(self.q)!r})"


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


def _pre_key(part: str) -> tuple[int, int, str]:
    # Numeric identifiers sort below alphanumeric ones and compare as numbers.
    return (0, int(part), "") if part.isdigit() else (1, 0, part)


@dataclass(frozen=True, slots=True, eq=False)
class CelSemver:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> CelSemver:
        m = _SEMVER.match(str(text))
        if m is None:
            raise CelValueError(f"invalid semver {text!r}")
        pre = tuple(m.group(4).split(".")) if m.group(4) else ()
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, str(text))

    def key(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        # A release sorts above every prerelease of the same version (1.0.0-rc.1 < 1.0.0).
        return (
            self.major,
            self.minor,
            self.patch,
            0 if self.pre else 1,
            tuple(_pre_key(p) for p in self.pre),
        )

    def cmp(self, other: CelSemver) -> int:
        a, b = self.key(), other.key()
        return (a > b) - (a < b)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CelSemver):
            raise TypeError("no such overload: semver == other type")
        return self.key() == other.key()

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.key())

    def __lt__(self, other: object) -> bool:
        raise TypeError("semver values have no < operator; use isLessThan")

    __gt__ = __le__ = __ge__ = __lt__

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"semver({self.text!r})"
