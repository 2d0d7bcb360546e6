"""Flatten mixins (KEP-5234) and the composite draft's includes into plain devices.

Mixins apply in the order listed, a later one overriding an earlier one, and the
object's own fields override them all. A reference to a mixin the slice does not define
is reported (MixinNotFound) and skipped; the device keeps everything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import chain
from operator import attrgetter
from typing import Any

from draview.api.slices import (
    Capacity,
    CounterConsumption,
    CounterSet,
    CountersMixin,
    Device,
    DeviceMixin,
    ResourceSlice,
)


@dataclass(slots=True)
class FlatSlice:
    slice: ResourceSlice
    devices: tuple[Device, ...]
    counter_sets: tuple[CounterSet, ...]
    errors: list[str] = field(default_factory=list)
    # Why the profile's GatherPools skips this slice (engine/rules.py project): partitionable
    # devices off and it holds counter sets or selects nodes per device (it still counts
    # towards completeness), or compatibility groups it cannot check (it does not count:
    # `uncounted`).
    ignored: str | None = None
    uncounted: bool = False
    # The profile's buildPool reads the slice for its counter sets only: from 1.35 with
    # partitionable devices on, a slice holding sharedCounters is a counter-set slice and
    # its devices (a 1.34 layout kept through an upgrade) are never allocated.
    counters_only: bool = False


def _missing(slice_name: str, what: str, owner: str, ref: str) -> str:
    return f"MixinNotFound: slice {slice_name}: {owner} includes {what} mixin {ref!r}"


def _merge_counters(
    own: dict[str, str],
    includes: tuple[str, ...],
    mixins: dict[str, CountersMixin],
    on_missing: list[str],
) -> dict[str, str]:
    merged: dict[str, str] = {}
    for ref in includes:
        mixin = mixins.get(ref)
        if mixin is None:
            on_missing.append(ref)
            continue
        merged.update(mixin.counters)
    merged.update(own)
    return merged


def _flatten_device(
    dev: Device,
    device_mixins: dict[str, DeviceMixin],
    consumption_mixins: dict[str, CountersMixin],
    slice_name: str,
    errors: list[str],
) -> Device:
    if not dev.includes and not any(c.includes for c in dev.consumes_counters):
        return dev
    attributes: dict[str, Any] = {}
    capacity: dict[str, Capacity] = {}
    for ref in dev.includes:
        mixin = device_mixins.get(ref)
        if mixin is None:
            errors.append(_missing(slice_name, "device", f"device {dev.name}", ref))
            continue
        attributes.update(mixin.attributes)
        capacity.update(mixin.capacity)
    attributes.update(dev.attributes)
    capacity.update(dev.capacity)
    consumes: list[CounterConsumption] = []
    for c in dev.consumes_counters:
        missing: list[str] = []
        counters = _merge_counters(c.counters, c.includes, consumption_mixins, missing)
        for ref in missing:
            owner = f"device {dev.name} counter consumption"
            errors.append(_missing(slice_name, "deviceCounterConsumption", owner, ref))
        consumes.append(c.model_copy(update={"counters": counters, "includes": ()}))
    return replace(
        dev,
        attributes=attributes,
        capacity=capacity,
        consumes_counters=tuple(consumes),
        includes=(),
    )


_INCLUDES = attrgetter("includes")
_CONSUMES = attrgetter("consumes_counters")


def flatten_slice(s: ResourceSlice) -> FlatSlice:
    m = s.mixins
    # C passes over the slice's parts: every slice of every pool judged comes here, and
    # almost none includes anything.
    if (
        not (m.device or m.counter_set or m.device_counter_consumption)
        and not any(map(_INCLUDES, s.devices))
        and not any(map(_INCLUDES, s.shared_counters))
        and not any(map(_INCLUDES, chain.from_iterable(map(_CONSUMES, s.devices))))
    ):
        return FlatSlice(s, s.devices, s.shared_counters)
    errors: list[str] = []
    device_mixins = {x.name: x for x in m.device}
    set_mixins = {x.name: x for x in m.counter_set}
    consumption_mixins = {x.name: x for x in m.device_counter_consumption}
    devices = tuple(
        _flatten_device(d, device_mixins, consumption_mixins, s.name, errors) for d in s.devices
    )
    sets: list[CounterSet] = []
    for cs in s.shared_counters:
        if not cs.includes:
            sets.append(cs)
            continue
        missing: list[str] = []
        counters = _merge_counters(cs.counters, cs.includes, set_mixins, missing)
        for ref in missing:
            errors.append(_missing(s.name, "counterSet", f"counter set {cs.name}", ref))
        sets.append(replace(cs, counters=counters, includes=()))
    return FlatSlice(s, devices, tuple(sets), errors)
