"""Which of a node's searches still hold after a claim change: what `fit` keeps of them
when it is asked again (explain/fit_search.py Question.renew).

A claim change leaves a pool's slices as they were and changes who holds a few of its
devices, and with them what is left of the counter sets those devices debit: the
devices it "moves" are those and every device debiting such a set.

- A search whose walk ended before the first moved device it could meet answers the
  same after any such change: every device it looked at answers as before (`cut`).
- A change that only takes devices (no holder goes, no share or capacity changes)
  leaves fewer devices free and less of each counter. Every device a search passed
  over is refused still, so its answer stands unless it took a moved device; and where
  nothing fitted, nothing fits (`touches`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from draview.engine.judged import places_by_set
from draview.engine.model import PoolKey
from draview.engine.pool import OVERCOMMITTED, PoolResult
from draview.explain.gather import NodePool
from draview.explain.search import END, Location


@dataclass(frozen=True, slots=True)
class PoolChange:
    """A pool judged again with the same slices: its results then and now, the devices
    whose holders changed and the counter sets they debit (`devices` None: the change
    may reach any device of it), and whether it only took devices."""

    old: PoolResult
    new: PoolResult
    devices: frozenset[str] | None
    sets: frozenset[str]
    takes_only: bool

    @classmethod
    def of(cls, old: PoolResult, new: PoolResult) -> PoolChange:
        prepared, a, b = new.prepared, old.allocated, new.allocated
        if prepared is None or old.prepared is not prepared or a is None or b is None:
            return cls(old, new, None, frozenset(), False)
        parsed = prepared.parsed
        grouped = prepared.rules.compatibility_groups and parsed.group_uses
        overdrawn = any(e.startswith(OVERCOMMITTED) for r in (old, new) for e in r.errors.other)
        if parsed.errors or grouped or overdrawn:
            # Not by counter set: compatibility groups, or (overdrawn) a walk that
            # refuses every device debiting counters.
            return cls(old, new, None, frozenset(), False)
        names = (a.dedicated ^ b.dedicated) | (a.shared ^ b.shared) | (a.debited ^ b.debited)
        same_shares = a.shared == b.shared and a.debited == b.debited
        if a.capacity or b.capacity:
            used = a.capacity.keys() | b.capacity.keys()
            names.update(n for n in used if a.capacity.get(n) != b.capacity.get(n))
            same_shares = same_shares and a.capacity == b.capacity
        sets: set[str] = set()
        for name in names:
            debits = parsed.consumption.get(name)
            if debits:
                sets.update(ckey[0] for ckey, _ in debits)
        # More shares can leave a shareable device's counters debited already: not fewer.
        takes_only = same_shares and a.dedicated <= b.dedicated
        return cls(old, new, frozenset(names), frozenset(sets), takes_only)

    def moves(self, device: str) -> bool:
        """Whether the device is one the change moves (see the module's docstring)."""
        if self.devices is None or device in self.devices:
            return True
        prepared = self.new.prepared
        assert prepared is not None  # `devices` is None without it
        debits = prepared.parsed.consumption.get(device, ())
        return any(ckey[0] in self.sets for ckey, _ in debits)


def cut(
    pools: Sequence[NodePool],
    changes: Mapping[PoolKey, PoolChange],
    views: Mapping[PoolKey, tuple[PoolResult, int]],
) -> Location:
    """The first place in a node's walk (its pools in walk order, and by pool the view
    the node has of it: GatherIndex.by_node) where `changes` may move a device; END
    when none does. A pool named like a changed one is cut at its start: until 1.36.5
    the allocator shares counters across drivers between pools of the same name."""
    names = {key[1] for key in changes}
    for pi, p in enumerate(pools):
        if p.pool not in names:
            continue
        key = (p.driver, p.pool)
        change, view = changes.get(key), views.get(key)
        if change is None or view is None:
            return (pi, 0, 0)
        at = _first_moved(p, change, view[1])
        if at is not None:
            return (pi, *at)
    return END


def touches(devices: Iterable[tuple[str, str, str]], changes: Mapping[PoolKey, PoolChange]) -> bool:
    """Whether any of the devices (driver, pool, device) is one `changes` move, or is in
    a pool named like a changed one (counters shared across drivers by name)."""
    if not changes:
        return False
    names = {key[1] for key in changes}
    for driver, pool, device in devices:
        if pool in names:
            change = changes.get((driver, pool))
            if change is None or change.moves(device):
                return True
    return False


def _first_moved(p: NodePool, change: PoolChange, vi: int) -> tuple[int, int] | None:
    """The first of the pool's walked devices (slice, device) the change moves, or None."""
    prepared, parsed, names = change.new.prepared, p.parsed, change.devices
    if names is None or prepared is None or parsed is None:
        return (0, 0)
    if not names:
        return None
    if parsed.per_slice or parsed is not prepared.parsed:
        return (0, 0)  # the view counts other slices, or names its sets per slice
    if any(not parsed.consumption.get(name) for name in names):
        return (0, 0)  # a device without counters: its own place is not looked up
    current = {fs.slice.name: i for i, fs in enumerate(prepared.current)}
    if any(name not in current for name in p.names):
        return (0, 0)  # an older slice walked: not among places_by_set's
    walked = {current[name]: sj for sj, name in enumerate(p.names)}  # flat slice -> sj
    by_set = places_by_set(prepared, prepared.views[vi])
    first: tuple[int, int] | None = None
    for s in change.sets:
        for i, j in by_set.get(s, ()):
            sj = walked.get(i)
            if sj is None:
                return (0, 0)  # not in the walk's slices: never so, but not assumed
            at = (sj, j)
            if first is None or at < first:
                first = at
    return first
