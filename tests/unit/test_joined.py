"""explain/joined.py: several lists, or several maps, read as one without copying them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from draview.explain.joined import Joined, JoinedMap


def test_a_join_reads_as_its_parts_one_after_another() -> None:
    parts = [["a", "b"], [], ["c"], ["d", "e", "f"]]
    joined = Joined(parts)
    flat = ["a", "b", "c", "d", "e", "f"]
    assert len(joined) == 6
    assert list(joined) == flat
    assert joined[0] == "a" and joined[-1] == "f" and joined[3] == "d"
    assert list(joined[1:4]) == ["b", "c", "d"]
    assert joined == flat and joined == tuple(flat) and joined != flat[:-1]
    assert joined != ["a", "b", "c", "d", "e", "x"]
    assert Joined([]) == [] and len(Joined([[], []])) == 0
    assert "c" in joined and "x" not in joined


class _Counted(Mapping[str, str]):
    """A map that counts the keys looked up in it."""

    def __init__(self, items: dict[str, str]) -> None:
        self.items_ = items
        self.lookups = 0

    def __getitem__(self, key: str) -> str:
        self.lookups += 1
        return self.items_[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.items_)

    def __len__(self) -> int:
        return len(self.items_)


def test_joined_maps_read_as_their_union_with_one_pass_over_the_parts() -> None:
    parts = [_Counted({"a": "1", "b": "2"}), _Counted({}), _Counted({"c": "3"})]
    joined = JoinedMap(parts)
    assert len(joined) == 3 and list(joined) == ["a", "b", "c"]
    assert dict(sorted(joined.items())) == {"a": "1", "b": "2", "c": "3"}
    assert joined["c"] == "3" and joined.get("x", "none") == "none" and "b" in joined
    assert joined == {"c": "3", "a": "1", "b": "2"}
    # Each part's items are read once, in one pass: a ChainMap looks every key up in
    # each part before its own (a KeyError each), which is quadratic in the parts.
    assert [p.lookups for p in parts] == [2, 0, 1]
    assert len(JoinedMap([])) == 0 and dict(JoinedMap([{}, {}])) == {}
