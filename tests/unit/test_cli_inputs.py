"""Input and output of the CLI: a JSON List is streamed item by item and reads exactly like
json.loads; output written piece by piece is the same bytes as the one-string dump."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from draview.api.world import iter_objects
from draview.cli.inputs import InputError, iter_text, parse_text, read_sources

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
JSONS = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
OBJECTS = st.dictionaries(st.text(max_size=6), JSONS, max_size=4)


@given(
    head=OBJECTS,
    items=st.lists(OBJECTS, max_size=4),
    indent=st.sampled_from([None, 0, 2]),
    items_first=st.booleans(),
)
def test_a_streamed_list_reads_like_json_loads(
    head: dict[str, Any], items: list[dict[str, Any]], indent: int | None, items_first: bool
) -> None:
    head = {k: v for k, v in head.items() if k != "items"}
    doc = {"items": items, **head} if items_first else {**head, "items": items}
    text = json.dumps(doc, indent=indent)
    kind = head.get("kind", "List")
    if items_first and not (isinstance(kind, str) and kind.endswith("List")):
        # Items already streamed when the kind says it is no List: refused, not misread.
        with pytest.raises(InputError, match="after items: not a List"):
            list(iter_text(text, "t"))
        return
    assert list(iter_objects(iter_text(text, "t"))) == list(iter_objects([json.loads(text)]))


@pytest.mark.parametrize(
    "doc",
    [
        {"kind": None, "items": []},
        {"kind": "Widget", "items": [{"kind": "ResourceClaim"}]},
        {"kind": 3, "items": [{}, {}]},
    ],
)
def test_an_object_whose_kind_says_it_is_no_list_is_one_document(doc: dict[str, Any]) -> None:
    assert parse_text(json.dumps(doc), "t") == [doc]
    with pytest.raises(InputError, match=r"^t: line 1: kind .* after items: not a List$"):
        parse_text(json.dumps({"items": doc["items"], "kind": doc["kind"]}), "t")


@given(OBJECTS.filter(lambda d: "items" not in d))
def test_an_object_without_items_is_one_document(obj: dict[str, Any]) -> None:
    assert parse_text(json.dumps(obj), "t") == [obj]


def test_nested_lists_and_empty_lists() -> None:
    inner = {"kind": "List", "items": [{"kind": "A"}, {"kind": "B"}]}
    text = json.dumps(
        {"kind": "List", "items": [inner, {"kind": "C"}, {"kind": "List", "items": []}]}
    )
    assert [o["kind"] for o in iter_objects(iter_text(text, "t"))] == ["A", "B", "C"]
    assert parse_text('{"items": [], "kind": "List"}', "t") == []


def test_yaml_flow_style_still_reads() -> None:
    assert parse_text("{kind: List, items: [{kind: A}]}", "t") == [
        {"kind": "List", "items": [{"kind": "A"}]}
    ]


@pytest.mark.parametrize(
    "text",
    [
        '{"kind": "List", "items": [{"kind": "A"}, {"kind": }]}',
        '{"kind": "List", "items": [{"kind": "A"}] "x": 1}',
        '{"kind": "List", "items": [{"kind": "A"}]} trailing',
    ],
)
def test_a_list_broken_after_its_first_item_is_one_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "dump.json"
    path.write_text(text)
    with pytest.raises(InputError, match=rf"^{path}: line 1: invalid JSON: "):
        read_sources([str(path)])


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_written_output_is_the_same_bytes_as_dumped(fmt: str) -> None:
    import io

    from draview.cli.output import as_list, dump, write

    items = [
        {"kind": "K", "n": i, "s": "é " * i, "l": [{"a": None} for _ in range(3)]}
        for i in range(2000)
    ]
    for doc in (as_list(items), as_list([]), items[1]):
        out = io.StringIO()
        write(doc, fmt, out)
        assert out.getvalue() == dump(doc, fmt)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_analyze_writes_every_example_exactly_as_one_dump(fmt: str) -> None:
    import io
    from pathlib import Path

    from draview.api.world import build_world
    from draview.cli.inputs import iter_sources
    from draview.cli.output import as_list, dump, write
    from draview.engine.model import EngineOptions
    from draview.engine.world import world_objects

    examples = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
    world = build_world(iter_sources([str(p) for p in examples]))
    doc = as_list(world_objects(world, EngineOptions(partition_attributes=("profile",))))
    out = io.StringIO()
    write(doc, fmt, out)
    assert out.getvalue() == dump(doc, fmt)
