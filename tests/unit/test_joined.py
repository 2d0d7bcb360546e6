"""explain/joined.py: several lists read as one, without copying them."""

from __future__ import annotations

from draview.explain.joined import Joined


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
