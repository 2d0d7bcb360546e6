"""Consumable capacity (allowMultipleAllocations), as the allocator's consumable_capacity.go
computes it. Quantities are exact; where the allocator rounds to whole units
(`Quantity.Value()`, which rounds up) so does this module."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from draview.api.slices import Capacity, Device
from draview.engine.model import AllocRef
from draview.quantity import Format, Quantity, try_parse_quantity

ONE = Quantity.from_int(1)


def _q(text: str | None) -> Quantity | None:
    return try_parse_quantity(text) if text is not None else None


def _has_policy(cap: Capacity) -> bool:
    return (
        cap.request_default is not None
        or cap.valid_min is not None
        or cap.valid_max is not None
        or cap.valid_step is not None
        or bool(cap.valid_values)
    )


def _has_range(cap: Capacity) -> bool:
    return cap.valid_min is not None or cap.valid_max is not None or cap.valid_step is not None


def probe_request(cap: Capacity) -> Quantity:
    """The smallest request the capacity's policy permits: what draview asks when it
    decides whether a shareable device can take one more share (one unit when the
    policy sets no lower bound)."""
    low = _q(cap.valid_min)
    if low is not None:
        return low
    values = [q for q in map(_q, cap.valid_values) if q is not None]
    return min(values) if values else ONE


def _round_up_range(requested: Quantity, low: Quantity, step: Quantity | None) -> Quantity:
    if requested < low:
        return low
    if step is None:
        return requested
    r, s, m = requested.as_int_ceil(), step.as_int_ceil(), low.as_int_ceil()
    if s <= 0:
        return requested  # no API server holds such a step (validation divides by it)
    n, mod = divmod(r - m, s)  # r >= m here, so floor division is Go's truncation
    return Quantity.from_int(m + s * (n + (1 if mod else 0)), Format.BinarySI)


def consumed(requested: Quantity | None, cap: Capacity) -> Quantity | None:
    """calculateConsumedCapacity: what one allocation takes of this capacity."""
    if requested is None:
        # fillEmptyRequest: the policy's default, or else the whole capacity.
        return _q(cap.request_default) if cap.request_default is not None else _q(cap.value)
    if not _has_policy(cap):
        return requested
    low = _q(cap.valid_min)
    if low is not None:
        return _round_up_range(requested, low, _q(cap.valid_step))
    if cap.valid_values:
        for text in cap.valid_values:  # in the order given, like the allocator
            v = _q(text)
            if v is not None and requested <= v:
                return v
    return requested


def violates_policy(q: Quantity, cap: Capacity) -> bool:
    if not _has_policy(cap):
        return False
    if cap.request_default is not None and _q(cap.request_default) == q:
        return False
    if _has_range(cap):
        high = _q(cap.valid_max)
        if high is not None and q > high:
            return True
        step, low = _q(cap.valid_step), _q(cap.valid_min)
        if step is not None and low is not None and step.as_int_ceil() > 0:
            return (q.as_int_ceil() - low.as_int_ceil()) % step.as_int_ceil() != 0
        return False
    if cap.valid_values:
        return all(_q(v) != q for v in cap.valid_values)
    return False


def request_fits(
    dev: Device,
    requests: Mapping[str, Quantity] | None,
    used: Mapping[str, Quantity] | None,
    allocating: Mapping[str, Quantity] | None = None,
) -> bool | None:
    """CmpRequestOverCapacity: True when the request fits what is left of every capacity
    of the device (`used` by existing shares, `allocating` by this attempt), None when
    it names a capacity the device does not have (the allocator skips the device)."""
    if requests and any(name not in dev.capacity for name in requests):
        return None
    for name, cap in dev.capacity.items():
        value = _q(cap.value)
        take = consumed(requests.get(name) if requests else None, cap)
        if value is None or take is None or violates_policy(take, cap):
            return False
        total = take
        for more in (used, allocating):
            if more and name in more:
                total = total + more[name]
        if total > value:
            return False
    return True


def taken(dev: Device, requests: Mapping[str, Quantity] | None) -> dict[str, Quantity]:
    """GetConsumedCapacityFromRequest: what a new share takes of each capacity."""
    out: dict[str, Quantity] = {}
    for name, cap in dev.capacity.items():
        q = consumed(requests.get(name) if requests else None, cap)
        if q is not None:
            out[name] = q
    return out


def probe_requests(dev: Device) -> dict[str, Quantity] | None:
    """draview's probe of a device: the smallest permitted share of a shareable device,
    nothing (each capacity whole) of any other."""
    if not dev.allow_multiple_allocations:
        return None
    return {name: probe_request(cap) for name, cap in dev.capacity.items()}


def capacity_fits(dev: Device, used: Mapping[str, Quantity] | None) -> bool:
    """Whether draview's probe fits the device; `used` is what shares already hold."""
    # Each capacity of a device that is not shared is taken whole: it fits unless a policy
    # says otherwise (the API allows policies on shareable devices only; offline input
    # may have them). The common case, every claim change for every device, parses nothing.
    if (
        not used
        and not dev.allow_multiple_allocations
        and not any(_has_policy(cap) for cap in dev.capacity.values())
    ):
        return True
    return request_fits(dev, probe_requests(dev), used) is True


def shared_capacity(
    dev: Device, refs: Sequence[AllocRef]
) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """(total, available) of each capacity given the device's allocations, for display.

    Admin-access results never consume capacity.
    """
    total: dict[str, Quantity] = {}
    available: dict[str, Quantity] = {}
    for name, cap in dev.capacity.items():
        q = try_parse_quantity(cap.value)
        if q is None:
            continue
        total[name] = q
        left = q
        for ref in refs:
            if ref.admin_access:
                continue
            for cname, text in ref.consumed:
                if cname == name:
                    used = try_parse_quantity(text)
                    if used is not None:
                        left = left - used
        available[name] = left
    return total, available
