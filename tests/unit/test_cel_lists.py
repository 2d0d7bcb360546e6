"""List-typed attributes and derived attributes in CEL, per how the profile sees lists.

The expected answers are those of the scheduler's own CEL library, asked expression by
expression (DeviceMatches and EvaluateDerivedAttribute of k8s.io/dynamic-resource-
allocation v0.37.2 and v0.36.6, with the same device): True/False, or an error (None).
"""

from __future__ import annotations

import pytest

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

D = "device.attributes['d.io']."
ATTRS = {
    "s": {"string": "abc"},
    "n": {"int": 3},
    "b": {"bool": True},
    "v": {"version": "1.2.3"},
    "ss": {"strings": ["a", "b"]},
    "ns": {"ints": [1, 2]},
    "bs": {"bools": [True]},
    "vs": {"versions": ["1.0.0", "2.0.0-rc.1"]},
}


def device(lists: str = LISTS_EXPOSED, attrs: dict[str, object] | None = None) -> DeviceInput:
    return DeviceInput("d.io", Device("dev-0", ATTRS if attrs is None else attrs), lists)


def answer(cel: CelEngine, expr: str, inp: DeviceInput) -> bool | None:
    result = cel.evaluate(expr, inp)
    return None if isinstance(result, CelRuntimeError) else result


# (expression, the scheduler's answer with lists seen as lists)
EXPOSED = [
    (f"'a' in {D}ss", True),
    (f"'a' in {D}s", None),  # a string is no container
    (f"1 in {D}ns", True),
    (f"'a' in {D}ns", False),  # another type: not equal, no error
    (f"{D}ss.exists(x, x == 'a')", True),
    (f"{D}ns.exists(x, x == 'a')", False),
    (f"{D}ss.includes('a')", True),
    (f"{D}s.includes('abc')", True),  # a single value includes itself
    (f"{D}ns.includes('a')", False),
    (f"size({D}ss) == 2", True),
    (f"size({D}s) == 3", True),
    (f"size({D}n) == 1", None),
    (f"{D}ss == 'a'", False),
    (f"{D}s == 3", False),
    (f"{D}n == 3.0", True),
    (f"{D}ss == ['a', 'b']", True),
    (f"{D}v == '1.2.3'", None),  # a semver's own equality refuses a string
    (f"{D}v == semver('1.2.3')", True),
    (f"'1.2.3' == {D}v", False),  # a string's does not
    (f"semver('1.0.0') in {D}vs", True),
    (f"'1.0.0' in {D}vs", False),
    (f"{D}vs.includes(semver('2.0.0-rc.1'))", True),
    (f"{D}s != 3", True),
    (f"{D}ss.all(x, x != 'c')", True),
    (f"{D}bs.exists(x, x)", True),
    (f"{D}ss.exists(x, x.startsWith('a'))", True),
    (f"{D}ns.exists(x, x > 1)", True),
    (f"{D}missing.includes(1)", None),
    (f"{D}ns.sum() == 3", True),
    (f"{D}ss.isSorted()", True),
]


@pytest.mark.parametrize(("expr", "want"), EXPOSED)
def test_lists_seen_as_lists(expr: str, want: bool | None) -> None:
    assert answer(CelEngine(), expr, device()) is want


@pytest.mark.parametrize("lists", [LISTS_REFUSED, LISTS_ABSENT])
def test_a_list_the_library_cannot_read_fails_every_selector(lists: str) -> None:
    cel = CelEngine()
    # Even one that never reads it: every attribute is converted first (1.36 without the
    # gate, and 1.34/1.35 whose API types have no list fields).
    result = cel.evaluate(f"{D}n == 3", device(lists))
    assert isinstance(result, CelRuntimeError)
    assert "unsupported attribute value" in str(result)
    scalars = {k: v for k, v in ATTRS.items() if len(k) == 1}
    assert cel.evaluate(f"{D}n == 3", device(lists, scalars)) is True


def test_includes_is_unknown_before_1_36() -> None:
    cel = CelEngine()
    scalars = {"s": {"string": "abc"}}
    assert cel.evaluate(f"{D}s.includes('abc')", device(LISTS_REFUSED, scalars)) is True
    with pytest.raises(CelCompileError):
        cel.evaluate(f"{D}s.includes('abc')", device(LISTS_ABSENT, scalars))


def test_an_unreadable_attribute_is_an_error_like_in_go() -> None:
    cel = CelEngine()
    for bad in ({"version": "v1"}, {}, {"strings": []}, {"ints": ["1"]}):
        result = cel.evaluate("device.driver == 'd.io'", device(attrs={"x": bad}))
        assert isinstance(result, CelRuntimeError), bad


def test_the_cache_keeps_list_views_apart() -> None:
    cel = CelEngine()
    expr = f"'a' in {D}ss"
    assert cel.evaluate(expr, device(), key="dev") is True
    assert isinstance(cel.evaluate(expr, device(LISTS_REFUSED), key="dev"), CelRuntimeError)
    assert cel.evaluate(expr, device(), key="dev") is True


# (derived attribute expression, the attribute the scheduler makes of it; None: an error)
DERIVED = [
    (f"{D}ns", ("ints", (1, 2))),
    (f"{D}s", ("string", "abc")),
    (f"{D}v", ("version", "1.2.3")),
    (f"{D}vs", ("versions", ("1.0.0", "2.0.0-rc.1"))),
    ("[]", ("strings", ())),
    (f"[{D}n, 'x']", None),
    ("1.5", None),
    (f"{D}n > 2 ? 1.5 : 2.5", None),
    ("1u", None),
    (f"{D}ss.map(x, x + '!')", ("strings", ("a!", "b!"))),
    (f"{D}missing", None),
    ("{'a': 1}", None),
    (f"{D}n == 3", ("bool", True)),
    ("[[1]]", None),
    ("semver('1.2.3-rc.1+b.2')", ("version", "1.2.3-rc.1+b.2")),
    (f"{D}ns.filter(x, x > 5)", ("strings", ())),
]


@pytest.mark.parametrize(("expr", "want"), DERIVED)
def test_derived_values(expr: str, want: tuple[str, object] | None) -> None:
    got = CelEngine().derive(expr, device())
    if want is None:
        assert isinstance(got, CelRuntimeError)
    else:
        assert got == want
