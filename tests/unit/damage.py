"""Random damage to raw objects, for tests that compare a fast reader with the models."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

# Values of every JSON type, including the ones a lax model would coerce.
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
    st.just([]),
    st.just({}),
    st.just({"value": "1"}),
    st.just([{"name": "x"}]),
)


def paths_of(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (the empty path included)."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(paths_of(v, (*prefix, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(paths_of(v, (*prefix, i)))
    return out


Edit = tuple[tuple[Any, ...], Any, bool]  # path, new value, delete instead


def damaged(base: dict[str, Any], edits: list[Edit]) -> dict[str, Any]:
    """A copy of `base` with each edit applied where its path still leads somewhere."""
    obj = copy.deepcopy(base)
    for path, value, delete in edits:
        parent: Any = obj
        try:
            for step in path[:-1]:
                parent = parent[step]
            if delete and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = copy.deepcopy(value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or replaced the way there
    return obj
