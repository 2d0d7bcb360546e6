"""Work in steps: a long computation written as a generator that yields between small
pieces of work, so that a caller on an event loop can let other work run in between
(the operator's explanations of pending claims at 65,000 nodes are minutes of CPU, and
its Lease must be renewed meanwhile). The answer is the generator's return value, the
same however the steps are driven."""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")

Steps = Generator[None, None, T]


def finish(steps: Steps[T]) -> T:
    """Run every step now; the answer."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def done(value: T) -> Steps[T]:
    """Steps that are already done: `value`, with no step."""
    return value
    yield  # a generator (never reached)
