"""Read-only views of several lists one after another, or of several maps with disjoint
keys as one, joined without copying."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from typing import overload


class Joined(Sequence[str]):
    """The lists in `parts`, in order, as one sequence. `why` adds up the device lists of
    a thousand pools explained apart at each asking of a probe; a probe reads only their
    lengths, and copying 200,000 device ids would cost more than the pools that
    changed. Indexing joins them once, on first use. The parts must not change."""

    __slots__ = ("_flat", "_len", "_parts")

    def __init__(self, parts: Sequence[Sequence[str]], length: int | None = None) -> None:
        """`length`: their lengths' sum, when the caller keeps it."""
        self._parts = parts
        self._len = sum(len(p) for p in parts) if length is None else length
        self._flat: list[str] | None = None

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._parts)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...

    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if self._flat is None:
            self._flat = list(self)
        return self._flat[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == self._len and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a sequence that compares by value

    def __repr__(self) -> str:
        return f"Joined({list(self)!r})"


class JoinedMap(Mapping[str, str]):
    """The maps in `parts` as one; no key is in two of them (`why`'s details of the pools
    explained apart, by device id). Unlike a ChainMap, reading every item costs one pass
    over the parts: a ChainMap looks each key up in every part before its own, which over
    a thousand pools and 200,000 blocked devices took half a minute. A lookup joins them
    into one dict on first use. The parts must not change."""

    __slots__ = ("_flat", "_len", "_parts")

    def __init__(self, parts: Sequence[Mapping[str, str]], length: int | None = None) -> None:
        """`length`: their lengths' sum, when the caller keeps it."""
        self._parts = parts
        self._len = sum(len(p) for p in parts) if length is None else length
        self._flat: dict[str, str] | None = None

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._parts)

    def __getitem__(self, key: str) -> str:
        if self._flat is None:
            flat: dict[str, str] = {}
            for part in self._parts:
                flat.update(part)
            self._flat = flat
        return self._flat[key]

    def __repr__(self) -> str:
        return f"JoinedMap({dict(self)!r})"
