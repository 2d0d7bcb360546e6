"""The nesting of a large JSON item read from its text agrees with the walk of the decoded
value, and a streamed input is refused for depth exactly when the walk would refuse it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from draview.cli.inputs import _decode
from draview.cli.limits import TEXT_PASSES, LimitExceeded, check_depth, text_nesting

# Strings that hide brackets, quotes and escapes, and characters beyond ASCII (the text is
# encoded before it is measured).
AWKWARD = st.text(alphabet=st.sampled_from('[]{}"\\/ab é\n\u2028\U0001f600'), max_size=5)
PLAIN = st.text(alphabet=st.sampled_from("abc-./:é 0"), max_size=5)


def _values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), strings
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
        max_leaves=25,
    )


def nesting(value: Any) -> int:
    """Containers in the value's deepest chain, by recursion (the tests' own reference)."""
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    return 0


def _text(value: Any, indent: int | None, ascii_only: bool, pad: str) -> tuple[str, int, int]:
    body = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    text = f"{pad}{body}{pad}"
    return text, len(pad), len(pad) + len(body)


FORMATS = {
    "indent": st.sampled_from([None, 0, 2]),
    "ascii_only": st.booleans(),
    "pad": st.sampled_from(["", " ", ',"x": "]]"} ,']),
}


@settings(max_examples=300)
@given(value=_values(AWKWARD), **FORMATS)
def test_the_text_tells_the_nesting_exactly_or_not_at_all(
    value: Any, indent: int | None, ascii_only: bool, pad: str
) -> None:
    text, start, end = _text(value, indent, ascii_only, pad)
    found = text_nesting(text, start, end, most=100)
    assert found is None or found == nesting(value)


@settings(max_examples=300)
@given(value=_values(PLAIN), **FORMATS)
def test_without_brackets_in_strings_the_text_always_tells(
    value: Any, indent: int | None, ascii_only: bool, pad: str
) -> None:
    text, start, end = _text(value, indent, ascii_only, pad)
    if "\\" in text[start:end]:  # an escape (of é, with ascii_only) may hide a quote
        assert text_nesting(text, start, end, 100) is None
        return
    expected = nesting(value)
    for most in (expected, expected + 1, 100):
        found = text_nesting(text, start, end, most)
        assert found == (expected if expected <= TEXT_PASSES else None)
    if expected:
        assert text_nesting(text, start, end, expected - 1) is None  # never a short count


@settings(max_examples=300)
@given(value=_values(AWKWARD), max_depth=st.integers(1, 12), depth=st.integers(1, 3))
def test_a_value_is_refused_exactly_when_the_walk_refuses_it(
    value: Any, max_depth: int, depth: int
) -> None:
    text = json.dumps(value)
    try:
        check_depth(value, max_depth, depth)
        refused = False
    except LimitExceeded:
        refused = True
    if refused:
        with pytest.raises(LimitExceeded, match=f"deeper than {max_depth} levels"):
            _decode(text, 0, max_depth, depth)
    else:
        assert _decode(text, 0, max_depth, depth) == (value, len(text))


def _chain(levels: int, leaf: Any = "x") -> Any:
    value = leaf
    for i in range(levels):
        value = {"k": value, "flat": 1} if i % 2 else [value, "["]
    return value


@pytest.mark.parametrize("levels", [1, 8, TEXT_PASSES, TEXT_PASSES + 1, 99, 100, 101])
def test_deep_values_around_the_limit(levels: int) -> None:
    """Past TEXT_PASSES the walk decides; either way the limit falls on the same level."""
    for leaf in ("x", "a [ string ] with brackets", '"quoted"'):
        value = _chain(levels, leaf)
        assert nesting(value) == levels
        text = json.dumps(value)
        assert _decode(text, 0, levels, 1)[0] == value
        with pytest.raises(LimitExceeded):
            _decode(text, 0, levels - 1, 1)


def test_a_slice_item_is_measured_from_its_text() -> None:
    """The shape the engine bench streams: brackets only as structure, no escapes."""
    device = {
        "name": "gpu-0-mig-1g-5gb-3",
        "attributes": {"profile": {"string": "1g.5gb"}, "uuid": {"string": "GPU-é"}},
        "capacity": {"memory": {"value": "4864Mi"}},
        "consumesCounters": [{"counterSet": "cs", "counters": {"memory": {"value": "1"}}}],
    }
    item = {"kind": "ResourceSlice", "spec": {"devices": [device] * 3}}
    text = json.dumps(item, indent=2, ensure_ascii=False)  # as kubectl prints it
    assert text_nesting(text, 0, len(text), 100) == nesting(item) == 8
    # One escaped quote anywhere: the text cannot tell, the walk does.
    device["name"] = 'gpu "0"'
    text = json.dumps(item, ensure_ascii=False)
    assert text_nesting(text, 0, len(text), 100) is None
    assert _decode(text, 0, 100, 3)[0] == item
