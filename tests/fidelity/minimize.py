"""Shrink a world that shows a disagreement to the fewest objects that still show it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import yaml


def minimize(
    objects: Sequence[dict[str, Any]],
    still_fails: Callable[[list[dict[str, Any]]], bool],
    keep: Callable[[dict[str, Any]], bool],
) -> list[dict[str, Any]]:
    """Greedy one-at-a-time removal (a simple delta debugging): drop each object that
    `keep` allows to drop while `still_fails` holds, until no single removal does."""
    current = list(objects)
    changed = True
    while changed:
        changed = False
        for obj in list(current):
            if keep(obj):
                continue
            trial = [o for o in current if o is not obj]
            if still_fails(trial):
                current, changed = trial, True
    return current


def dump(objects: Sequence[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(list(objects), sort_keys=False)
