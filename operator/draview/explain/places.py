"""Where a list of objects kept from an earlier asking and the list of now differ."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import compress, count
from operator import is_not


def changed_places(now: Sequence[object], before: Sequence[object]) -> Iterator[int]:
    """The places (up to the shorter list's end) where `now` holds another object than
    `before`, found in C: a probe asked again after one claim changed has one or a few
    among the thousands of pools of a large cluster, which a Python loop would walk."""
    return compress(count(), map(is_not, now, before))
