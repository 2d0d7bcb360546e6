"""Compatibility groups (DRADeviceCompatibilityGroups, 1.37 alpha).

A device's counter consumption may name compatibility groups: the devices drawing from
one counter set at the same time must all share at least one of them, and a device that
names none only goes together with others that name none. The allocator keeps, per pool
and counter set, the running intersection over the devices already allocated (read from
the slices, like their counters) and those taken so far by the attempt; a device is
refused when any of its counter sets would be left with no common group. Only the
experimental allocator with the feature on checks this (rules.compatibility_groups); a
share of a device whose counters are already debited is not checked again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from draview.api.slices import CounterConsumption

# One device instance's consumption: (counter set, the groups it names) per entry.
Uses = tuple[tuple[str, frozenset[str]], ...]


@dataclass(frozen=True, slots=True)
class Intersection:
    """What the devices on one counter set have in common so far. `all_empty` stands for
    "every member named no group", which an ordinary intersection cannot say."""

    members: bool = False
    all_empty: bool = False
    groups: frozenset[str] = frozenset()

    def admits(self, groups: frozenset[str]) -> bool:
        if not self.members:
            return True
        if not groups:
            return self.all_empty
        if self.all_empty:
            return False
        return bool(self.groups & groups)

    def add(self, groups: frozenset[str]) -> Intersection:
        if not self.members:
            return Intersection(True, not groups, groups)
        if self.all_empty or not groups:
            return self
        return Intersection(True, False, self.groups & groups)


EMPTY = Intersection()


def uses_of(consumes: Sequence[CounterConsumption]) -> Uses:
    return tuple((c.counter_set, frozenset(c.compatibility_groups)) for c in consumes)


def declares_groups(devices_consumes: Iterable[Sequence[CounterConsumption]]) -> bool:
    return any(c.compatibility_groups for consumes in devices_consumes for c in consumes)


def baseline(
    uses: Iterable[tuple[str, Uses]], allocated: Callable[[str], bool]
) -> dict[str, Intersection]:
    """Per counter set, the intersection over the allocated device instances (by name)."""
    out: dict[str, Intersection] = {}
    for name, entries in uses:
        if not allocated(name):
            continue
        for counter_set, groups in entries:
            out[counter_set] = out.get(counter_set, EMPTY).add(groups)
    return out


def admit(running: Mapping[str, Intersection], uses: Uses) -> dict[str, Intersection] | None:
    """The running intersections with the device added, or None when it does not fit.
    `running` is never changed, so the caller's copy is its snapshot for backtracking."""
    after = dict(running)
    for counter_set, groups in uses:
        cur = after.get(counter_set, EMPTY)
        if not cur.admits(groups):
            return None
        after[counter_set] = cur.add(groups)
    return after
