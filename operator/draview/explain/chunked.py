"""A list with a place per pool or node that changes in a few places between askings and
is handed out whole at each: Chunked, and Snapshot, what it held when handed out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Generic, TypeVar, overload

T = TypeVar("T")

# Items per chunk: putting one copies 32 pointers, a snapshot of a thousand places
# copies 32.
CHUNK = 32


class Chunked(Generic[T]):
    """A list kept as tuples of CHUNK items: putting an item copies its chunk, and a
    snapshot costs a pointer per chunk. A capacity probe's explanation and node fits
    have a place per pool or node of the cluster, change in one or a few at each
    asking, and are handed out in an answer that must not change afterwards. Copying
    the thousands of places at each asking touched every item they point to (a cache
    miss each), which cost more than the pools that changed."""

    __slots__ = ("_chunks", "_len")

    def __init__(self, items: Iterable[T] = ()) -> None:
        flat = list(items)
        self._len = len(flat)
        self._chunks = [tuple(flat[i : i + CHUNK]) for i in range(0, len(flat), CHUNK)]

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> T:
        if not 0 <= i < self._len:
            raise IndexError(i)
        return self._chunks[i // CHUNK][i % CHUNK]

    def __setitem__(self, i: int, value: T) -> None:
        if not 0 <= i < self._len:
            raise IndexError(i)
        c, k = divmod(i, CHUNK)
        old = self._chunks[c]
        self._chunks[c] = (*old[:k], value, *old[k + 1 :])

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._chunks)

    def snapshot(self) -> Snapshot[T]:
        """The items as they are now, whatever is put later."""
        return Snapshot(tuple(self._chunks), self._len)


class Snapshot(Sequence[T]):
    """A Chunked list as it was when taken: read only."""

    __slots__ = ("_chunks", "_len")

    def __init__(self, chunks: tuple[tuple[T, ...], ...], length: int) -> None:
        self._chunks, self._len = chunks, length

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[T]: ...

    def __getitem__(self, i: int | slice) -> T | Sequence[T]:
        if isinstance(i, slice):
            return list(self)[i]
        j = i + self._len if i < 0 else i
        if not 0 <= j < self._len:
            raise IndexError(i)
        return self._chunks[j // CHUNK][j % CHUNK]

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._chunks)

    def __repr__(self) -> str:
        return f"Snapshot({list(self)!r})"
