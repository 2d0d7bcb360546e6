"""Exact Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource.Quantity).

A :class:`Quantity` holds its value as an exact integer count of nano-units
(10^-9) plus the :class:`Format` that decides how it is printed. Every value
that can be built here is a multiple of 10^-9, because parsing rounds to the
nano-unit exactly as apimachinery does, and addition, subtraction and negation
stay on that grid. Floats are never used.

Semantics follow apimachinery's ``ParseQuantity``, ``Quantity.Add``/``Sub``/``Cmp``
and ``Quantity.String``/``CanonicalizeBytes``:

* Grammar: ``[+-]? digits? ("." digits?)? suffix`` where the suffix is binary
  (``Ki Mi Gi Ti Pi Ei``), decimal (``n u m "" k M G T P E``) or a decimal
  exponent (``e``/``E`` followed by a signed integer). Like Go, a number with no
  digits is zero: ``"."``, ``"-"``, ``"Mi"`` and ``"k"`` all parse as 0.
* Parsing rounds a non-zero value *away from zero* to the next nano-unit
  (``"0.1n"`` is ``1n``, ``"-0.1n"`` is ``-1n``).
* A binary-suffixed value is capped in magnitude at 2^63-1 (``"8Ei"`` parses as
  9223372036854775807); a binary value strictly between -1 and 1 is re-tagged
  DecimalSI. Zero keeps its suffix's format (``"0Ki"`` is BinarySI, ``"0"`` is
  DecimalSI).
* ``a + b`` and ``a - b`` keep ``a``'s format, unless ``a`` is zero, in which
  case the result takes ``b``'s format.
* ``str()`` is the canonical form: the largest suffix that keeps an integer
  mantissa, base-10 exponents a multiple of 3. BinarySI values that are not
  integers or whose magnitude is below 1024 print as DecimalSI.

Deliberate deviations from Go (all in corner cases no API server emits):

* ``str()`` is always canonical. Go's ``String()`` echoes some parsed inputs
  verbatim (``"+1"``, ``"01"``, ``"1.500"``, ``"1E3"``); here they print as
  ``"1"``, ``"1"``, ``"1500m"``, ``"1e3"``.
* An exponent outside the int32 range is rejected (Go silently wraps it), and so
  is a decimal value of magnitude 10^1000 or more (Go keeps it in an
  arbitrary-precision decimal).
* BinarySI values of 1024^7 or more (reachable only by arithmetic) print with
  an ``Ei`` mantissa (``"1024Ei"``); Go drops the suffix and prints a wrong value.
* DecimalSI values needing an exponent above 18 print in exponent form
  (``"1e21"``), as current apimachinery does; older releases dropped the
  exponent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from functools import lru_cache
from typing import Final

__all__ = [
    "Format",
    "Quantity",
    "QuantityError",
    "parse_quantity",
    "sum_quantities",
]


class Format(StrEnum):
    """How a quantity is printed (the Go ``resource.Format`` values)."""

    BinarySI = "BinarySI"  # e.g. 12Mi (12 * 2^20)
    DecimalSI = "DecimalSI"  # e.g. 12M (12 * 10^6)
    DecimalExponent = "DecimalExponent"  # e.g. 12e6


_BIN: Final = Format.BinarySI
_DEC: Final = Format.DecimalSI
_EXP: Final = Format.DecimalExponent

_NANO: Final = 10**9
# Parsing caps binary-suffixed values at the largest int64, like apimachinery's maxAllowed.
_MAX_BINARY_NANOS: Final = (2**63 - 1) * _NANO
# A decimal value must be below 10**_MAX_DIGITS in magnitude (see module docstring).
_MAX_DIGITS: Final = 1000
_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1
# Digit strings longer than this are converted in chunks: CPython refuses int()
# on strings above sys.get_int_max_str_digits() (4300 by default).
_INT_CHUNK: Final = 4000
_INT_CHUNK_SCALE: Final[int] = 10**_INT_CHUNK

# suffix -> (is_binary, exponent, format); the exponent is of 2 for binary, of 10 otherwise.
_SUFFIXES: Final[dict[str, tuple[bool, int, Format]]] = {
    "": (False, 0, _DEC),
    "n": (False, -9, _DEC),
    "u": (False, -6, _DEC),
    "m": (False, -3, _DEC),
    "k": (False, 3, _DEC),
    "M": (False, 6, _DEC),
    "G": (False, 9, _DEC),
    "T": (False, 12, _DEC),
    "P": (False, 15, _DEC),
    "E": (False, 18, _DEC),
    "Ki": (True, 10, _BIN),
    "Mi": (True, 20, _BIN),
    "Gi": (True, 30, _BIN),
    "Ti": (True, 40, _BIN),
    "Pi": (True, 50, _BIN),
    "Ei": (True, 60, _BIN),
}
_DECIMAL_SUFFIX_FOR_EXPONENT: Final[dict[int, str]] = {
    -9: "n",
    -6: "u",
    -3: "m",
    0: "",
    3: "k",
    6: "M",
    9: "G",
    12: "T",
    15: "P",
    18: "E",
}
_BINARY_SUFFIX_FOR_POWER: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")

# Go's scanner, greedy at every step: sign, integer digits, optional "." and
# fraction digits, then everything else is the suffix (validated separately).
_NUMBER_RE: Final = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", re.DOTALL)
_EXPONENT_RE: Final = re.compile(r"[eE]([+-]?)([0-9]+)")
_LETTERS_RE: Final = re.compile(r"[A-Za-z]+[-+]?[0-9]*")


class QuantityError(ValueError):
    """A string is not a valid Kubernetes quantity."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"invalid quantity {json.dumps(text)}: {reason}")
        self.text = text
        self.reason = reason


def _int(digits: str) -> int:
    """int() of a decimal digit string of any length."""
    if len(digits) <= _INT_CHUNK:
        return int(digits)
    return _int(digits[:-_INT_CHUNK]) * _INT_CHUNK_SCALE + int(digits[-_INT_CHUNK:])


def _exponent_suffix(text: str, suffix: str) -> tuple[bool, int, Format]:
    m = _EXPONENT_RE.fullmatch(suffix)
    if m is None:
        if _LETTERS_RE.fullmatch(suffix):
            raise QuantityError(text, f"unknown suffix {json.dumps(suffix)}")
        raise QuantityError(text, "malformed number or suffix")
    sign, digits = m.groups()
    digits = digits.lstrip("0")
    if len(digits) > 19:
        raise QuantityError(text, "exponent out of range")
    exponent = int(digits or "0")
    if sign == "-":
        exponent = -exponent
    if not _INT32_MIN <= exponent <= _INT32_MAX:
        # Go rejects exponents outside int64 and wraps those outside int32; reject both.
        raise QuantityError(text, "exponent out of range")
    return False, exponent, _EXP


def _parse(text: str) -> Quantity:
    if not text:
        raise QuantityError(text, "empty string")
    m = _NUMBER_RE.fullmatch(text)
    if m is None:  # pragma: no cover - the pattern matches every string
        raise QuantityError(text, "malformed number")
    sign, whole, frac, suffix = m.groups()
    spec = _SUFFIXES.get(suffix)
    if spec is None:
        spec = _exponent_suffix(text, suffix)
    binary, exponent, fmt = spec

    # value = int(whole + frac) * base**exponent / 10**len(frac)
    if frac:
        frac = frac.rstrip("0")
        digits = (whole + frac).lstrip("0")
        k = len(frac)
    else:
        digits = whole.lstrip("0")
        k = 0
    if not digits:
        return Quantity(0, fmt)

    if binary:
        if len(digits) - k > 20:  # at least 10**20 > 2**63 - 1: capped
            nanos = _MAX_BINARY_NANOS
        else:
            scaled = _int(digits) << exponent
            # value * 10^9, rounded up to the nano-unit
            nanos = scaled * 10 ** (9 - k) if k <= 9 else -(-scaled // 10 ** (k - 9))
            if nanos > _MAX_BINARY_NANOS:
                nanos = _MAX_BINARY_NANOS
            elif nanos < _NANO:
                fmt = _DEC
    else:
        if len(digits) + exponent - k > _MAX_DIGITS:
            raise QuantityError(text, "value out of range")
        shift = exponent + 9 - k
        if shift >= 0:
            nanos = int(digits) * 10**shift
        else:
            cut = len(digits) + shift  # digits at or above the nano-unit
            if cut <= 0:
                nanos = 1
            else:
                nanos = int(digits[:cut])
                if len(digits.rstrip("0")) > cut:  # a non-zero sub-nano remainder
                    nanos += 1
    return Quantity(-nanos if sign == "-" else nanos, fmt)


@lru_cache(maxsize=1 << 16)
def parse_quantity(s: str) -> Quantity:
    """Parse a Kubernetes quantity string exactly as apimachinery's ParseQuantity does.

    Raises :class:`QuantityError` for strings Kubernetes rejects. Results are cached.
    """
    return _parse(s)


def try_parse_quantity(s: str | None) -> Quantity | None:
    """The quantity, or None for a missing or unparsable one (where validation has
    already reported it and the caller only needs the value if there is one). Through
    parse_quantity's cache: a pool's capacities repeat a few strings on every device."""
    if s is None:
        return None
    try:
        return parse_quantity(s)
    except QuantityError:
        return None


@lru_cache(maxsize=1 << 16)
def _canonical(nanos: int, fmt: Format) -> str:
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = -nanos if nanos < 0 else nanos
    if fmt == _BIN and magnitude >= 1024 * _NANO and magnitude % _NANO == 0:
        value = magnitude // _NANO
        power = 0
        while power < 6 and value % 1024 == 0:
            value //= 1024
            power += 1
        return f"{sign}{value}{_BINARY_SUFFIX_FOR_POWER[power]}"
    # Decimal forms: strip factors of 1000 so the exponent stays a multiple of 3.
    exponent = -9
    while magnitude % 1000 == 0:
        magnitude //= 1000
        exponent += 3
    if fmt != _EXP:  # DecimalSI, and BinarySI values not printable exactly in base 1024
        suffix = _DECIMAL_SUFFIX_FOR_EXPONENT.get(exponent)
        if suffix is not None:
            return f"{sign}{magnitude}{suffix}"
        # No SI suffix beyond E (10^18): fall back to exponent notation, like apimachinery.
    return f"{sign}{magnitude}e{exponent}" if exponent else f"{sign}{magnitude}"


# Cached: a status renders the same few counter values over and over, on every claim
# change, straight from the integers it sums (no Quantity built to print one).
@lru_cache(maxsize=8192)
def format_nanos(nanos: int, fmt: Format) -> str:
    """str(Quantity(nanos, fmt)), without building the Quantity."""
    return _canonical(nanos, fmt)


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """An exact Kubernetes quantity: ``nanos`` * 10^-9, printed in format ``fmt``.

    Equality, hashing and ordering are by value only: ``parse_quantity("1Ki") ==
    parse_quantity("1024")``. The format only affects ``str()`` and the format
    of arithmetic results.
    """

    nanos: int
    fmt: Format = Format.DecimalSI

    # -- construction -------------------------------------------------------------------

    @classmethod
    def zero(cls, fmt: Format = Format.DecimalSI) -> Quantity:
        return cls(0, fmt)

    @classmethod
    def from_int(cls, n: int, fmt: Format = Format.DecimalSI) -> Quantity:
        """The integer ``n`` (like Go's ``NewQuantity(n, fmt)``)."""
        if not isinstance(n, int):
            raise TypeError(f"from_int() needs an int, not {type(n).__name__}")
        return cls(n * _NANO, fmt)

    # -- inspection ---------------------------------------------------------------------

    def sign(self) -> int:
        """-1, 0 or 1."""
        return (self.nanos > 0) - (self.nanos < 0)

    def is_zero(self) -> bool:
        return self.nanos == 0

    def as_fraction(self) -> Fraction:
        """The exact value."""
        return Fraction(self.nanos, _NANO)

    def to_decimal(self) -> Decimal:
        """The exact value as a Decimal (no context rounding), e.g. Decimal('1.5')."""
        whole, rest = divmod(abs(self.nanos), _NANO)
        sign = "-" if self.nanos < 0 else ""
        if rest == 0:
            return Decimal(f"{sign}{whole}")
        return Decimal(f"{sign}{whole}.{rest:09d}".rstrip("0"))

    def as_int_ceil(self) -> int:
        """The smallest integer >= the value (ceiling; -1.5 gives -1).

        Go's ``Value()`` rounds away from zero instead; the two agree for values >= 0.
        """
        return -(-self.nanos // _NANO)

    # -- arithmetic (apimachinery Add/Sub format rules) -------------------------------

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity(self.nanos + other.nanos, other.fmt if self.nanos == 0 else self.fmt)

    def __radd__(self, other: int) -> Quantity:
        # Lets the built-in sum() start from 0; a DecimalSI zero takes our format anyway.
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity(self.nanos - other.nanos, other.fmt if self.nanos == 0 else self.fmt)

    def __neg__(self) -> Quantity:
        return Quantity(-self.nanos, self.fmt)

    def __pos__(self) -> Quantity:
        return self

    def __abs__(self) -> Quantity:
        return self if self.nanos >= 0 else Quantity(-self.nanos, self.fmt)

    # -- comparison (by value) ---------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos == other.nanos

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos >= other.nanos

    # -- text ---------------------------------------------------------------------------

    def __str__(self) -> str:
        """The canonical string, as apimachinery's ``Quantity.String()`` computes it."""
        return _canonical(self.nanos, self.fmt)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, {self.fmt.value})"


def sum_quantities(items: Iterable[Quantity], start: Quantity | None = None) -> Quantity:
    """``start + item0 + item1 + ...`` with apimachinery's Add format rules.

    Whenever the running total is zero it adopts the next item's format, so with the
    default ``start`` (a DecimalSI zero) the result usually has the first item's format.
    """
    acc = Quantity.zero() if start is None else start
    nanos = acc.nanos
    fmt = acc.fmt
    for item in items:
        if nanos == 0:
            fmt = item.fmt
        nanos += item.nanos
    return Quantity(nanos, fmt)
