"""1.34: an invalid pool that a node gathers aborts scheduling attempts everywhere.

Kubernetes 1.34's allocator (experimental, v0.34.13) returns an error from allocateOne as
soon as its walk over the node's pools meets an invalid one (duplicate device names),
and its scheduler's Filter turns any allocator error into an error for the whole
scheduling attempt, not for that node alone (rules.invalid_pool_is_node_local off; from
1.35 such an error is ErrFailedAllocationOnNode). The walk meets the pools in Go map
order, new on every Allocate call (rules.pools_sorted off). So for a claim pinned to one
device, on a node that gathers an invalid pool:

- if the node cannot allocate the device, its walk meets the invalid pool in every
  order: every attempt aborts, whatever the other nodes could do (`InvalidPoolAborts`);
- if it can, it allocates when the device's pool comes before every invalid pool in its
  order and aborts otherwise: the answer depends on the order (`InvalidPoolMayAbort`).

This depends on every pool of the cluster, not on the device's own: `find_aborts` reads
it from all prepared pools, and compute_pool takes it as an input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from draview.api.slices import any_binding_conditions
from draview.api.status import Condition, Partition
from draview.engine.attributes import attribute
from draview.engine.conditions import condition
from draview.engine.flatten import FlatSlice
from draview.engine.model import PoolKey
from draview.engine.node_views import View
from draview.engine.partitions import PartitionInput

# The device's pool may come after an invalid pool: some attempts abort.
MAY_ABORT = "InvalidPoolMayAbort"
# Some node that gathers an invalid pool cannot allocate the device: every attempt aborts.
ABORTS = "InvalidPoolAborts"
CONDITION = "AbortedByInvalidPools"
SHOWN = 3

Verdict = tuple[str, str | None]
Offer = tuple[tuple[str | None, ...], set[tuple[int, int]]]  # a view's nodes, what it hands out


@dataclass(frozen=True, slots=True)
class Aborts:
    """Which nodes gather an invalid pool, and which pools those are (empty: none, or
    a profile whose allocator keeps such errors on the node)."""

    seen: Mapping[str | None, tuple[PoolKey, ...]] = field(default_factory=dict)
    why: Mapping[PoolKey, str] = field(default_factory=dict)  # each pool's first error
    # Per node, 1 when every invalid pool it gathers holds devices with binding
    # conditions (GatherPools puts those pools last, rules.binding_pools_last), else 0.
    tier: Mapping[str | None, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.seen)


NO_ABORTS = Aborts()


def binding_view(view: View, flat: Sequence[FlatSlice]) -> bool:
    """Whether the view holds a device with binding conditions: 1.34's GatherPools then
    puts the pool after those without (rules.binding_pools_last)."""
    return any(any_binding_conditions(flat[i].devices) for i in {i for i, _ in view.targets})


def invalid_nodes(
    views: Sequence[View], flat: Sequence[FlatSlice], binding_last: bool = True
) -> list[tuple[str | None, int]]:
    """The nodes whose view of a pool is invalid, each with the pool's tier there."""
    return [
        (n, int(binding_last and binding_view(v, flat)))
        for v in views
        if any(o.kind == "invalid" for o in v.outcomes)
        for n in v.nodes
    ]


class InvalidPools:
    """Which nodes see which pool invalid, kept per pool as pools are judged one by one
    (the operator), and the Aborts that follow."""

    def __init__(self) -> None:
        self.by_pool: dict[PoolKey, tuple[tuple[tuple[str | None, int], ...], str]] = {}
        self.aborts = NO_ABORTS
        self._changed = False

    def note(
        self,
        key: PoolKey,
        views: Sequence[View],
        flat: Sequence[FlatSlice],
        errors: Sequence[str],
        binding_last: bool = True,
    ) -> None:
        nodes = tuple(invalid_nodes(views, flat, binding_last))
        entry = (nodes, errors[0] if errors else "invalid") if nodes else None
        if self.by_pool.get(key) != entry:
            self._changed = True
            if entry is None:
                del self.by_pool[key]
            else:
                self.by_pool[key] = entry

    def forget(self, key: PoolKey) -> None:
        if self.by_pool.pop(key, None) is not None:
            self._changed = True

    def settle(self) -> bool:
        """Bring `aborts` up to date; True when it changed (every pool must be judged
        again)."""
        if not self._changed:
            return False
        self._changed = False
        seen: dict[str | None, list[PoolKey]] = {}
        tier: dict[str | None, int] = {}
        for key, (nodes, _) in sorted(self.by_pool.items()):
            for n, t in nodes:
                seen.setdefault(n, []).append(key)
                tier[n] = min(t, tier.get(n, t))
        why = {key: err for key, (_, err) in self.by_pool.items()}
        found = Aborts({n: tuple(keys) for n, keys in seen.items()}, why, tier)
        if found == self.aborts:
            return False
        self.aborts = found
        return True


def find_aborts(
    pools: Iterable[tuple[PoolKey, Sequence[View], Sequence[FlatSlice], Sequence[str]]],
    binding_last: bool = True,
) -> Aborts:
    """From every pool of the cluster: (key, its node views, its slices, its allocator
    errors)."""
    tracker = InvalidPools()
    for key, views, flat, errors in pools:
        tracker.note(key, views, flat, errors, binding_last)
    tracker.settle()
    return tracker.aborts


def _kinds(
    offers: Sequence[Offer], tiers: Sequence[int], aborts: Aborts
) -> dict[tuple[int, int], dict[str | None, str]]:
    """Per device a view hands out, per node that gathers an invalid pool and offers it:
    "ok" when the device's pool always comes before that node's invalid pools, "maybe"
    when either can come first, "aborts" when an invalid pool always comes first."""
    out: dict[tuple[int, int], dict[str | None, str]] = {}
    meeting = aborts.seen.keys()
    for (nodes, free), tier in zip(offers, tiers, strict=True):
        for n in meeting & set(nodes):
            first = aborts.tier.get(n, 0)
            kind = "aborts" if first < tier else ("maybe" if first == tier else "ok")
            for at in free:
                out.setdefault(at, {})[n] = kind
    return out


def _combined(kinds: Mapping[str | None, str], meeting: int) -> str:
    """Over the nodes that gather an invalid pool (each node's walk its own order)."""
    if len(kinds) < meeting or "aborts" in kinds.values():
        return "aborts"
    return "maybe" if "maybe" in kinds.values() else "ok"


def settle(
    verdicts: dict[tuple[int, int], Verdict],
    offers: Sequence[Offer],
    tiers: Sequence[int],
    aborts: Aborts,
) -> None:
    """Turn every allocatable device into one refused in every attempt, or in some, as
    the nodes that gather an invalid pool can allocate it or not. `tiers`: per offer, 1
    when GatherPools puts the pool last there (binding conditions), else 0."""
    if not aborts:
        return
    kinds = _kinds(offers, tiers, aborts)
    for at, verdict in verdicts.items():
        if verdict[0] == "yes":
            found = _combined(kinds.get(at, {}), len(aborts.seen))
            if found != "ok":
                verdicts[at] = ("maybe", MAY_ABORT) if found == "maybe" else ("no", ABORTS)


def abort_condition(
    aborts: Aborts,
    refused: int,
    maybe: int,
    previous: Mapping[str, Condition] | None,
    now: str | None,
) -> Condition:
    """Says which invalid pools, seen by which nodes, refuse how many devices here."""
    pools = sorted({k for keys in aborts.seen.values() for k in keys})
    named = "; ".join(f"{d}/{p} ({aborts.why.get((d, p), 'invalid')})" for d, p in pools[:SHOWN])
    if len(pools) > SHOWN:
        named += f" and {len(pools) - SHOWN} more"
    nodes = sorted(("an assumed node" if n is None else n) for n in aborts.seen)
    where = ", ".join(nodes[:SHOWN]) + (
        f" and {len(nodes) - SHOWN} more" if len(nodes) > SHOWN else ""
    )
    message = (
        f"the scheduler aborts an attempt when the allocator of a node meets an invalid pool: "
        f"{named}, gathered by {len(nodes)} node(s) ({where}); here {refused} device(s) "
        f"are refused in every attempt and {maybe} in the attempts where a node meets "
        "the invalid pool first"
    )
    return condition(CONDITION, True, "InvalidPoolGathered", message, previous, now)


def aborted_partitions(
    parts: list[Partition],
    driver: str,
    inputs: Sequence[PartitionInput],
    offers: Sequence[Offer],
    tiers: Sequence[int],
    verdicts: Mapping[tuple[int, int], Verdict],
    aborts: Aborts,
) -> None:
    """A claim for devices of a type aborts in every attempt unless each node that
    gathers an invalid pool can allocate one of them: then its count holds only where
    those nodes meet this pool first (method firstFit), else nothing fits. `inputs`
    count the devices an invalid pool may refuse as free; `available` counts them out."""
    kinds = _kinds(offers, tiers, aborts)
    for part in parts:
        members = [
            i for i in inputs if str(attribute(i.device, driver, part["attribute"])) == part["type"]
        ]
        reached: dict[str | None, str] = {}
        for i in members:
            # One view per node: every device of the pool it offers is of one kind there.
            reached.update(kinds.get(i.at, {}))
        found = _combined(reached, len(aborts.seen))
        if found == "aborts":
            part["allocatable"], part["method"] = 0, "exact"
        elif found == "maybe":
            part["method"] = "firstFit"
        part["available"] = sum(
            1
            for i in members
            if i.current and i.state in FREE and verdicts.get(i.at, ("", None))[1] != MAY_ABORT
        )


FREE = ("Available", "PartiallyAllocated")
