"""A read-only sequence of several lists one after another, joined without copying."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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
