"""RFC 7386 JSON merge patches: the smallest patch that turns `old` into `new`."""

from __future__ import annotations

from typing import Any


def merge_diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Maps are merged key by key (a removed key becomes null); lists are replaced whole."""
    patch: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            sub = merge_diff(before, value)
            if sub:
                patch[key] = sub
        elif before != value or key not in old:
            patch[key] = value
    for key in old:
        if key not in new:
            patch[key] = None
    return patch
