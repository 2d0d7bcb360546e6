"""Items joined when they share a key: the connected components of the graph whose
edges are shared keys (union-find), for pools whose devices share counters and for
nodes that gather a common pool."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")


def components(items: Sequence[T], keys: Callable[[T], Iterable[Hashable]]) -> list[list[T]]:
    """The items grouped by the keys they share, directly or through others: each group
    in the items' order, the groups in the order of their first items."""
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[Hashable, int] = {}
    for i, item in enumerate(items):
        for key in keys(item):
            if key in owner:
                parent[find(i)] = find(owner[key])
            else:
                owner[key] = i
    groups: dict[int, list[T]] = {}
    for i, item in enumerate(items):
        groups.setdefault(find(i), []).append(item)
    return list(groups.values())
