"""Parse and check a pool's current slices the way the allocator validates a pool.

Everything here becomes an allocator error (the scheduler would skip the whole pool):
duplicate device or counter-set names, references to counter sets or counters that do
not exist, and quantities that do not parse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from draview.api.slices import Device
from draview.engine.flatten import FlatSlice
from draview.quantity import Quantity, QuantityError, parse_quantity

CounterKey = tuple[str, str]  # (counter set, counter)


@dataclass(slots=True)
class ParsedPool:
    counter_totals: dict[CounterKey, Quantity] = field(default_factory=dict)
    counter_set_slice: dict[str, str] = field(default_factory=dict)  # set -> defining slice
    # device name -> what one allocation of it debits from the pool's counters
    consumption: dict[str, list[tuple[CounterKey, Quantity]]] = field(default_factory=dict)
    devices: dict[str, tuple[str, Device]] = field(default_factory=dict)  # name -> (slice, dev)
    errors: list[str] = field(default_factory=list)


def parse_q(text: str, where: str, errors: list[str]) -> Quantity | None:
    try:
        return parse_quantity(text)
    except QuantityError as exc:
        errors.append(f"InvalidQuantity: {where}: {exc}")
        return None


def parse_pool(current: Sequence[FlatSlice]) -> ParsedPool:
    p = ParsedPool()
    errors = p.errors
    declared: set[CounterKey] = set()
    for fs in current:
        for cs in fs.counter_sets:
            if cs.name in p.counter_set_slice:
                errors.append(
                    f"DuplicateCounterSet: counter set {cs.name} is defined in slices "
                    f"{p.counter_set_slice[cs.name]} and {fs.slice.name}"
                )
                continue
            p.counter_set_slice[cs.name] = fs.slice.name
            for counter, text in cs.counters.items():
                declared.add((cs.name, counter))
                q = parse_q(text, f"counter set {cs.name} counter {counter}", errors)
                if q is not None:
                    p.counter_totals[(cs.name, counter)] = q
    for fs in current:
        for dev in fs.devices:
            if dev.name in p.devices:
                errors.append(
                    f"DuplicateDevice: device {dev.name} appears in slices "
                    f"{p.devices[dev.name][0]} and {fs.slice.name}"
                )
                continue
            p.devices[dev.name] = (fs.slice.name, dev)
            debits: list[tuple[CounterKey, Quantity]] = []
            for cc in dev.consumes_counters:
                if cc.counter_set not in p.counter_set_slice:
                    errors.append(
                        f"CounterSetNotFound: device {dev.name} consumes from counter set "
                        f"{cc.counter_set}, which the pool does not define"
                    )
                    continue
                for counter, text in cc.counters.items():
                    key = (cc.counter_set, counter)
                    if key not in declared:
                        errors.append(
                            f"CounterNotFound: device {dev.name} consumes counter {counter} "
                            f"of counter set {cc.counter_set}, which has no such counter"
                        )
                        continue
                    q = parse_q(text, f"device {dev.name} consumes {counter}", errors)
                    if q is not None:
                        debits.append((key, q))
            p.consumption[dev.name] = debits
            for cap_name, cap in dev.capacity.items():
                where = f"device {dev.name} capacity {cap_name}"
                texts = (cap.value, cap.request_default, cap.valid_min, cap.valid_max)
                for cap_text in (*texts, *cap.valid_values):
                    if cap_text is not None:
                        parse_q(cap_text, where, errors)
    return p
