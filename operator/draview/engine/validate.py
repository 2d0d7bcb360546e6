"""Parse and check a pool's current slices the way the allocator validates a pool.

Everything here becomes an allocator error (the scheduler would skip the whole pool):
duplicate device or counter-set names, references to counter sets or counters that do
not exist, and quantities that do not parse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from draview.api.slices import Device
from draview.api.status import CounterUsage
from draview.engine.compat import Uses, declares_groups, uses_of
from draview.engine.flatten import FlatSlice
from draview.quantity import Quantity, QuantityError, parse_quantity, try_parse_quantity

V = TypeVar("V")

CounterKey = tuple[str, str]  # (counter set, counter)
# One counter of a set as the status shows it: its name, key, total, the total rendered,
# and the whole row while nothing consumes it. That row is shared by every computation
# (and every pool defining the same set): a judged body is never changed in place.
SetRow = tuple[str, CounterKey, Quantity, str, CounterUsage]


@dataclass(slots=True)
class ParsedPool:
    counter_totals: dict[CounterKey, Quantity] = field(default_factory=dict)
    counter_set_slice: dict[str, str] = field(default_factory=dict)  # set -> defining slice
    # device name -> what one allocation of it debits from the pool's counters
    # (devices that debit nothing have no entry: most devices of a large cluster)
    consumption: dict[str, list[tuple[CounterKey, Quantity]]] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)  # device name -> its slice
    errors: list[str] = field(default_factory=list)
    # Every counter set with its counters sorted by name, totals already rendered: the
    # status shows them on every recompute, and rendering is most of that work.
    sets: dict[str, list[SetRow]] = field(default_factory=dict)
    # Every device instance whose allocation debits the counters, duplicates included
    # (the allocator subtracts once per instance it finds); none that debits nothing.
    counted: list[tuple[str, list[tuple[CounterKey, Quantity]]]] = field(default_factory=list)
    # Devices naming one counter set twice: their debits summed per counter (see needs).
    needs_summed: dict[str, list[tuple[CounterKey, Quantity]]] = field(default_factory=dict)
    # id(capacity map) -> whether any of its capacities has a request policy. Keyed by
    # id, which is safe while `devices` keeps every map alive.
    policy_cache: dict[int, bool] = field(default_factory=dict)
    whole_cache: dict[int, bool] = field(default_factory=dict)  # takes_whole, alike
    # False where the profile's allocator has partitionable devices off: a device that
    # consumes counters is never handed out.
    partitionable: bool = True
    # 1.34 (rules.counters_per_pool off): counter sets are a slice's own, named
    # "slice/set", and a device answers only to its own slice's counters.
    per_slice: bool = False
    # Every device instance that consumes counters, with the compatibility groups of each
    # consumption (engine/compat.py); empty unless some device of the pool names a group.
    group_uses: list[tuple[str, Uses]] = field(default_factory=list)
    # `needs` in nanos per device name, and `counted` by name, filled when first asked
    # for: explain/gather.py and explain/fit.py read them for every device of every
    # node's search, again for each question over the same pools.
    nanos_by_name: dict[str, tuple[tuple[CounterKey, int], ...]] | None = None
    counted_by_name: dict[str, list[list[tuple[CounterKey, Quantity]]]] | None = None

    def has_policy(self, dev: Device) -> bool:
        found = self.policy_cache.get(id(dev.capacity))
        if found is None:
            found = self.policy_cache[id(dev.capacity)] = any(
                c.request_default is not None
                or c.valid_min is not None
                or c.valid_max is not None
                or c.valid_step is not None
                or bool(c.valid_values)
                for c in dev.capacity.values()
            )
        return found

    def takes_whole(self, dev: Device) -> bool:
        """True when the device, asked for no capacity and with none of it in use,
        surely fits: no capacity has a request policy and every value reads (else
        capacity.request_fits works it out). The search asks it of every device it
        walks past."""
        found = self.whole_cache.get(id(dev.capacity))
        if found is None:
            found = self.whole_cache[id(dev.capacity)] = not self.has_policy(dev) and all(
                c.value is not None and try_parse_quantity(c.value) is not None
                for c in dev.capacity.values()
            )
        return found

    def needs(self, device: str) -> list[tuple[CounterKey, Quantity]]:
        """What one allocation of the device debits, one entry per counter (the same
        counter set named twice in consumesCounters adds up; settled at parse time)."""
        if self.needs_summed:
            found = self.needs_summed.get(device)
            if found is not None:
                return found
        return self.consumption.get(device, [])

    def counted_of(self, device: str) -> list[list[tuple[CounterKey, Quantity]]]:
        """The debits of each instance of the device in `counted` (none: it debits nothing)."""
        found = self.counted_by_name
        if found is None:
            # Filled before it is shared: a probe's fit reads it in a worker thread.
            found = {}
            for name, debits in self.counted:
                found.setdefault(name, []).append(debits)
            self.counted_by_name = found
        return found.get(device, [])

    def nanos(self) -> Mapping[str, tuple[tuple[CounterKey, int], ...]]:
        """`needs` in nanos of every device that debits something (one that does not is
        not in it), all converted at the first call: a search gathers every device of
        the pool."""
        found = self.nanos_by_name
        if found is None:
            # Filled before it is shared, as counted_by_name.
            found = {name: _in_nanos(self.needs(name)) for name in self.consumption}
            self.nanos_by_name = found
        return found


def parse_q(text: str, where: str, errors: list[str]) -> Quantity | None:
    try:
        return parse_quantity(text)
    except QuantityError as exc:
        errors.append(f"InvalidQuantity: {where}: {exc}")
        return None


def parse_pool(
    counter_slices: Sequence[FlatSlice],
    device_slices: Sequence[FlatSlice] | None = None,
    other_slices: Sequence[FlatSlice] = (),
    per_slice: bool = False,
) -> ParsedPool:
    """Validate like the allocator's buildPool: counter sets come from `counter_slices`,
    device names must be unique within `device_slices`, and every device of those and of
    `other_slices` (the pool's slices that do not reach the node) must consume only
    counters that exist. Called with one list, that list plays every part.

    per_slice: as 1.34's allocator reads a pool (checkAvailableCounters keyed by slice):
    each slice's counter sets are its own, a device debits only those, and one of them
    overdrawn refuses every device of that slice (zero debits on the counters a device
    does not consume say so); nothing but device names is validated."""
    parser = _PoolParser(per_slice)
    for fs in counter_slices:
        parser.counter_sets(fs)
    for fs in counter_slices if device_slices is None else device_slices:
        for dev in _allocatable(fs):
            parser.device(fs.slice.name, dev)
    p = parser.pool
    for fs in other_slices:
        # Not the node's own devices: the allocator checks only what they consume.
        for dev in _allocatable(fs):
            debits = parser.debits(dev)
            if debits:
                p.counted.append((dev.name, debits))
    mine = counter_slices if device_slices is None else device_slices
    devices = [d for fs in (*mine, *other_slices) for d in _allocatable(fs) if d.consumes_counters]
    if declares_groups(d.consumes_counters for d in devices):
        p.group_uses = [(d.name, uses_of(d.consumes_counters)) for d in devices]
    return p


def _allocatable(fs: FlatSlice) -> tuple[Device, ...]:
    """The slice's devices as buildPool sees them: none in a counter-set slice from 1.35
    (FlatSlice.counters_only)."""
    return () if fs.counters_only else fs.devices


class _ByMap(Generic[V]):
    """What was parsed from a map that the fast reader interns (a thousand MIG nodes
    publish the same few dozen counter and consumption maps), shared by every pool that
    reads that map under the same name (or from what was parsed from it). Keyed by the
    object's id and holding it, so that the id cannot be reused by another object while
    the entry lives; bounded."""

    def __init__(self, most: int = 10_000) -> None:
        self.most = most
        self.entries: dict[tuple[str, int], tuple[object, V]] = {}

    def get(self, name: str, m: object) -> V | None:
        found = self.entries.get((name, id(m)))
        return found[1] if found is not None and found[0] is m else None

    def put(self, name: str, m: object, value: V) -> None:
        if len(self.entries) >= self.most:
            self.entries.clear()
        self.entries[(name, id(m))] = (m, value)


# A counter set: its counter names, totals and status rows (sorted, rendered).
_ParsedSet = tuple[frozenset[str], list[tuple[CounterKey, Quantity]], list[SetRow]]
# By counter set name and map: what one allocation debits (a parsed list per device
# would be most of a MIG pool's memory), and the parsed sets themselves.
_SHARED_DEBITS: _ByMap[list[tuple[CounterKey, Quantity]]] = _ByMap()
_SHARED_SETS: _ByMap[_ParsedSet] = _ByMap()
# Debits in nanos by the list they convert, which pools share (_SHARED_DEBITS): a
# thousand MIG nodes' 208,000 devices hold 208 lists.
_SHARED_NANOS: _ByMap[tuple[tuple[CounterKey, int], ...]] = _ByMap()


def _in_nanos(debits: list[tuple[CounterKey, Quantity]]) -> tuple[tuple[CounterKey, int], ...]:
    found = _SHARED_NANOS.get("", debits)
    if found is None:
        found = tuple((k, q.nanos) for k, q in debits)
        _SHARED_NANOS.put("", debits, found)
    return found


def _row(key: CounterKey, total: Quantity, text: str) -> SetRow:
    return key[1], key, total, text, {"total": text, "consumed": "0", "available": text}


class _PoolParser:
    """One parse_pool call: the pool it builds, and what it has already parsed. Devices
    of one pool share their counter and capacity maps (the fast reader interns them): a
    map that parsed cleanly once is not walked again. Keyed by id, which is safe while
    the slices keep every map alive."""

    def __init__(self, per_slice: bool = False) -> None:
        self.pool = ParsedPool(per_slice=per_slice)
        self.errors = self.pool.errors
        self.declared: dict[str, frozenset[str]] = {}  # counter set -> its counters
        self.parsed_maps: dict[int, list[tuple[str, Quantity]]] = {}
        self.clean_capacities: set[int] = set()
        self.per_slice = per_slice
        self.own: dict[str, list[str]] = {}  # per_slice: slice -> its counter sets

    def counter_sets(self, fs: FlatSlice) -> None:
        p = self.pool
        for cs in fs.counter_sets:
            name = f"{fs.slice.name}/{cs.name}" if self.per_slice else cs.name
            if name in p.counter_set_slice:
                self.errors.append(
                    f"DuplicateCounterSet: counter set {cs.name} is defined in slices "
                    f"{p.counter_set_slice[name]} and {fs.slice.name}"
                )
                continue
            p.counter_set_slice[name] = fs.slice.name
            self.own.setdefault(fs.slice.name, []).append(name)
            shared = _SHARED_SETS.get(name, cs.counters) or self._counter_set(name, cs.counters)
            self.declared[name], totals, p.sets[name] = shared
            p.counter_totals.update(totals)

    def _counter_set(self, name: str, counters: Mapping[str, str]) -> _ParsedSet:
        """A counter set's counters parsed, and its rows as the status shows them (sorted
        by counter, totals rendered); shared with every pool defining the same map under
        the same name when it parses cleanly."""
        errors = self.errors
        clean = len(errors)
        totals: list[tuple[CounterKey, Quantity]] = []
        for counter, text in counters.items():
            q = parse_q(text, f"counter set {name} counter {counter}", errors)
            if q is not None:
                totals.append(((name, counter), q))
        rows = [_row(k, q, str(q)) for k, q in sorted(totals, key=lambda kq: kq[0])]
        parsed = (frozenset(counters), totals, rows)
        if len(errors) == clean:
            _SHARED_SETS.put(name, counters, parsed)
        return parsed

    def _own_debits(self, slice_name: str, dev: Device) -> list[tuple[CounterKey, Quantity]]:
        """1.34: what `dev` debits of its own slice's counter sets, plus a zero debit on
        every other counter of them; consumption of any other set is never checked."""
        debits: list[tuple[CounterKey, Quantity]] = []
        for cc in dev.consumes_counters:
            name = f"{slice_name}/{cc.counter_set}"
            known = self.declared.get(name, frozenset())
            for counter, text in cc.counters.items():
                q = parse_q(text, f"device {dev.name} consumes {counter}", self.errors)
                if q is not None and counter in known:
                    debits.append(((name, counter), q))
        if not dev.consumes_counters:
            return debits
        zero, touched = Quantity.zero(), {key for key, _ in debits}
        for name in self.own.get(slice_name, ()):
            debits.extend(
                ((name, c), zero) for c in self.declared[name] if (name, c) not in touched
            )
        return debits

    def debits(self, dev: Device, slice_name: str = "") -> list[tuple[CounterKey, Quantity]]:
        """What one allocation of `dev` debits; unknown sets and counters are errors.
        The list may be shared with other devices and pools: never change it."""
        if self.per_slice:
            return self._own_debits(slice_name, dev)
        if len(dev.consumes_counters) == 1:
            cc = dev.consumes_counters[0]
            shared = _SHARED_DEBITS.get(cc.counter_set, cc.counters)
            known = self.declared.get(cc.counter_set)
            if shared is not None and known is not None and cc.counters.keys() <= known:
                return shared
        return self._debits(dev)

    def _debits(self, dev: Device) -> list[tuple[CounterKey, Quantity]]:
        errors = self.errors
        clean = len(errors)
        debits: list[tuple[CounterKey, Quantity]] = []
        for cc in dev.consumes_counters:
            known = self.declared.get(cc.counter_set)
            if known is None:
                errors.append(
                    f"CounterSetNotFound: device {dev.name} consumes from counter set "
                    f"{cc.counter_set}, which the pool does not define"
                )
                continue
            quantities = self.parsed_maps.get(id(cc.counters))
            if quantities is not None and cc.counters.keys() <= known:
                debits.extend(((cc.counter_set, c), q) for c, q in quantities)
                continue
            before, start = len(errors), len(debits)
            for counter, text in cc.counters.items():
                if counter not in known:
                    errors.append(
                        f"CounterNotFound: device {dev.name} consumes counter {counter} "
                        f"of counter set {cc.counter_set}, which has no such counter"
                    )
                    continue
                q = parse_q(text, f"device {dev.name} consumes {counter}", errors)
                if q is not None:
                    debits.append(((cc.counter_set, counter), q))
            if len(errors) == before:
                self.parsed_maps[id(cc.counters)] = [(k[1], q) for k, q in debits[start:]]
        if len(dev.consumes_counters) == 1 and debits and len(errors) == clean:
            cc = dev.consumes_counters[0]
            _SHARED_DEBITS.put(cc.counter_set, cc.counters, debits)
        return debits

    def device(self, slice_name: str, dev: Device) -> None:
        p = self.pool
        # Most devices of a large cluster (whole GPUs, NICs) consume no counters: no
        # debits are asked for them (this method runs for every device of every judgement).
        debits = self.debits(dev, slice_name) if dev.consumes_counters else None
        if debits:
            p.counted.append((dev.name, debits))
        if dev.name in p.devices:
            self.errors.append(
                f"DuplicateDevice: device {dev.name} appears in slices "
                f"{p.devices[dev.name]} and {slice_name}"
            )
            return
        p.devices[dev.name] = slice_name
        if debits:
            p.consumption[dev.name] = debits
        if debits is not None and len(dev.consumes_counters) > 1:
            sets = [c.counter_set for c in dev.consumes_counters]
            if len(set(sets)) < len(sets):
                summed: dict[CounterKey, Quantity] = {}
                for key, q in debits:
                    summed[key] = summed[key] + q if key in summed else q
                p.needs_summed[dev.name] = list(summed.items())
        if id(dev.capacity) not in self.clean_capacities:
            self.capacities(dev)

    def capacities(self, dev: Device) -> None:
        errors = self.errors
        before = len(errors)
        for cap_name, cap in dev.capacity.items():
            where = f"device {dev.name} capacity {cap_name}"
            texts = (cap.value, cap.request_default, cap.valid_min, cap.valid_max)
            for cap_text in (*texts, cap.valid_step, *cap.valid_values):
                if cap_text is not None:
                    q = parse_q(cap_text, where, errors)
                    if cap_text is cap.valid_step and q is not None and q.as_int_ceil() <= 0:
                        errors.append(
                            f"InvalidQuantity: {where}: validRange step {q} is not "
                            "positive (no API server holds it: validation divides by it)"
                        )
        if len(errors) == before:
            self.clean_capacities.add(id(dev.capacity))
