"""explain/places.py: the places where a kept list and the list of now hold other objects."""

from __future__ import annotations

from draview.explain.places import changed_places


def test_changed_places_are_those_holding_another_object() -> None:
    a, b, c = object(), object(), object()
    same_value = [1000, 2000]  # equal but not the same objects: changed all the same
    before = [a, b, c, *same_value]
    now = [a, c, c, *(int(str(v)) for v in same_value)]
    assert list(changed_places(now, before)) == [1, 3, 4]
    assert list(changed_places(before, before)) == []
    assert list(changed_places(now[:2], before)) == [1]  # up to the shorter list's end
