"""Fragmentation: free counter capacity that no single device can use.

A quota counts free counters; the allocator hands out devices. Two 8 GiB MIG partitions
free on two GPUs do not make one 10 GiB request: per counter of a pool, what is free next
to the most any one device still allocatable there would take of it. The difference is
what no single device or partition can use now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from draview.api.slices import Device
from draview.quantity import Quantity, try_parse_quantity

CounterKey = tuple[str, str]  # counter set, counter


@dataclass(frozen=True, slots=True)
class Fragment:
    counter_set: str
    counter: str
    available: Quantity
    largest: Quantity | None  # the most one allocatable device takes of it (None: none does)
    device: str | None  # that device

    @property
    def unusable(self) -> Quantity:
        """What no single allocatable device can use."""
        return self.available if self.largest is None else self.available - self.largest


def fragments(
    counter_sets: Sequence[Mapping[str, object]],
    devices: Iterable[tuple[Device, str]],
) -> list[Fragment]:
    """Per counter with some capacity free: what is free beyond what the largest device
    that is still allocatable (state Available) would take of it. `counter_sets`: a pool
    status body's counterSets; `devices`: the pool's current devices with their states.
    Only counters where some capacity is free and more than one device can take."""
    largest: dict[CounterKey, tuple[Quantity, str]] = {}
    for dev, state in devices:
        if state != "Available":
            continue
        for use in dev.consumes_counters:
            for counter, text in use.counters.items():
                q = try_parse_quantity(text)
                key = (use.counter_set, counter)
                if q is None or q.nanos <= 0:
                    continue
                best = largest.get(key)
                if best is None or q > best[0] or (q == best[0] and dev.name < best[1]):
                    largest[key] = (q, dev.name)
    out: list[Fragment] = []
    for cs in counter_sets:
        name = str(cs.get("name"))
        counters = cs.get("counters")
        if not isinstance(counters, Mapping):
            continue
        for counter, usage in sorted(counters.items()):
            available = try_parse_quantity(str(usage.get("available", "")))
            if available is None or available.nanos <= 0:
                continue
            best = largest.get((name, counter))
            if best is not None and best[0] >= available:
                continue
            out.append(
                Fragment(
                    name,
                    counter,
                    available,
                    best[0] if best else None,
                    best[1] if best else None,
                )
            )
    return out
