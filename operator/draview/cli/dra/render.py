"""`kubectl describe`-style text: aligned `Key:  value` blocks and counter bars."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from draview.quantity import Quantity, QuantityError, parse_quantity

INDENT = "  "


class Doc:
    """Lines of a describe page; sibling keys of one block share a value column."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def block(self, level: int, pairs: Sequence[tuple[str, object]]) -> None:
        if not pairs:
            return
        width = max(len(k) for k, _ in pairs) + 2  # "Key:" plus at least two spaces
        for key, value in pairs:
            text = "<none>" if value is None or value == "" else str(value)
            self.lines.append(f"{INDENT * level}{(key + ':').ljust(width)} {text}".rstrip())

    def head(self, level: int, key: str) -> None:
        self.lines.append(f"{INDENT * level}{key}:")

    def line(self, level: int, text: str) -> None:
        self.lines.append(f"{INDENT * level}{text}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _q(text: Any) -> Quantity | None:
    try:
        return parse_quantity(str(text))
    except QuantityError:
        return None


def bar(consumed: Quantity, total: Quantity, width: int = 10) -> str:
    """`██████░░░░`: the consumed share of total; any use shows, only full use fills."""
    if total.nanos <= 0:
        filled = width if consumed.nanos > 0 else 0
    else:
        filled = round(consumed.nanos * width / total.nanos)
        if consumed.nanos > 0:
            filled = max(filled, 1)
        if consumed < total:
            filled = min(filled, width - 1)
        filled = max(0, min(width, filled))
    return "█" * filled + "░" * (width - filled)


def counter_lines(doc: Doc, level: int, counter_sets: Sequence[dict[str, Any]]) -> None:
    """One bar per counter: `memory  ██████░░░░  24832Mi / 40Gi  (16128Mi left)`."""
    for cs in counter_sets:
        doc.head(level, str(cs.get("name")))
        counters = cs.get("counters") or {}
        width = max((len(n) for n in counters), default=0)
        for name, c in sorted(counters.items()):
            used, total = _q(c.get("consumed")), _q(c.get("total"))
            drawn = bar(used, total) if used is not None and total is not None else "?" * 10
            left = c.get("available", "?")
            doc.line(
                level + 1,
                f"{name.ljust(width)}  {drawn}  {c.get('consumed')} / {c.get('total')}"
                f"  ({left} available)",
            )


def caps_text(caps: dict[str, Any] | None) -> list[tuple[str, object]]:
    return [(k, v) for k, v in sorted((caps or {}).items())]
