"""Consumable capacity (allowMultipleAllocations), as the allocator's consumable_capacity.go
computes it. Quantities are exact; where the allocator rounds to whole units
(`Quantity.Value()`, which rounds up) so does this module. With 1.37's fractional capacity
ranges (`fractional`, rules.fractional_capacity_range) a range whose bounds all have
milli precision is worked in milli-units instead (useMilli)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from draview.api.slices import Capacity, Device
from draview.engine.model import AllocRef
from draview.quantity import Format, Quantity, try_parse_quantity

ONE = Quantity.from_int(1)
_NANOS_PER_MILLI = 10**6
_INT64_MAX = 2**63 - 1


class CapacityError(ValueError):
    """A request the allocator cannot represent in a range's milli arithmetic: it aborts
    the whole allocation instead of skipping the device (errCapacityRequestNotRepresentable)."""


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


def _milli(q: Quantity) -> int | None:
    """safeMilliValue: the value in milli-units when that loses nothing and fits int64."""
    whole, rest = divmod(q.nanos, _NANOS_PER_MILLI)
    return whole if rest == 0 and -_INT64_MAX - 1 <= whole <= _INT64_MAX else None


def _use_milli(cap: Capacity, fractional: bool) -> bool:
    """useMilli: the feature on, and min, max and step (where set) all exact in milli-units
    with a step of at least 1m. Whether any is fractional does not matter."""
    if not fractional:
        return False
    for text in (cap.valid_min, cap.valid_max, cap.valid_step):
        q = _q(text)
        if q is None:
            continue
        m = _milli(q)
        if m is None or (text is cap.valid_step and m < 1):
            return False
    return True


def _round_up_range(
    requested: Quantity, low: Quantity, step: Quantity | None, milli: bool = False
) -> Quantity:
    if requested < low:
        return low
    if step is None:
        return requested
    if milli:
        r = _milli(requested)
        if r is None:
            raise CapacityError(f"request {requested} is not a representable milli value")
        s, m = step.nanos // _NANOS_PER_MILLI, low.nanos // _NANOS_PER_MILLI
        n = -(-(r - m) // s)  # r >= m: Go's rounding up of a positive quotient
        if n > (_INT64_MAX - m) // s:
            raise CapacityError(f"rounding request {requested} up passes the milli-value range")
        return Quantity((m + s * n) * _NANOS_PER_MILLI, step.fmt)
    r, s, m = requested.as_int_ceil(), step.as_int_ceil(), low.as_int_ceil()
    if s <= 0:
        return requested  # no API server holds such a step (validation divides by it)
    n, mod = divmod(r - m, s)  # r >= m here, so floor division is Go's truncation
    return Quantity.from_int(m + s * (n + (1 if mod else 0)), Format.BinarySI)


def consumed(
    requested: Quantity | None, cap: Capacity, fractional: bool = False
) -> Quantity | None:
    """calculateConsumedCapacity: what one allocation takes of this capacity. Raises
    CapacityError where the allocator aborts (milli arithmetic only)."""
    if requested is None:
        # fillEmptyRequest: the policy's default, or else the whole capacity.
        return _q(cap.request_default) if cap.request_default is not None else _q(cap.value)
    if not _has_policy(cap):
        return requested
    low = _q(cap.valid_min)
    if low is not None:
        return _round_up_range(requested, low, _q(cap.valid_step), _use_milli(cap, fractional))
    if cap.valid_values:
        for text in cap.valid_values:  # in the order given, like the allocator
            v = _q(text)
            if v is not None and requested <= v:
                return v
    return requested


def violates_policy(q: Quantity, cap: Capacity, fractional: bool = False) -> bool:
    if not _has_policy(cap):
        return False
    if cap.request_default is not None and _q(cap.request_default) == q:
        return False
    if _has_range(cap):
        high = _q(cap.valid_max)
        if high is not None and q > high:
            return True
        step, low = _q(cap.valid_step), _q(cap.valid_min)
        if step is None or low is None:
            return False
        if _use_milli(cap, fractional):
            r = _milli(q)
            # A request off the milli grid violates the policy (safeMilliValue fails).
            return (
                r is None
                or (r - low.nanos // _NANOS_PER_MILLI) % (step.nanos // _NANOS_PER_MILLI) != 0
            )
        if step.as_int_ceil() > 0:
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
    fractional: bool = False,
) -> bool | None:
    """CmpRequestOverCapacity: True when the request fits what is left of every capacity
    of the device (`used` by existing shares, `allocating` by this attempt), None when
    it names a capacity the device does not have (the allocator skips the device).
    Raises CapacityError where the allocator aborts: every capacity's request is worked
    out before any is compared, as 1.37 does, so which one aborts does not depend on order."""
    if requests and any(name not in dev.capacity for name in requests):
        return None
    if not (requests or used or allocating):
        # Nothing asked and nothing in use (most devices, each search): a capacity with
        # no policy takes all of itself, which fits whenever its value reads.
        for cap in dev.capacity.values():
            if _has_policy(cap):
                break
            if _q(cap.value) is None:
                return False
        else:
            return True
    takes = [
        (name, cap, consumed(requests.get(name) if requests else None, cap, fractional))
        for name, cap in dev.capacity.items()
    ]
    for name, cap, take in takes:
        value = _q(cap.value)
        if value is None or take is None or violates_policy(take, cap, fractional):
            return False
        total = take
        for more in (used, allocating):
            if more and name in more:
                total = total + more[name]
        if total > value:
            return False
    return True


def taken(
    dev: Device, requests: Mapping[str, Quantity] | None, fractional: bool = False
) -> dict[str, Quantity]:
    """GetConsumedCapacityFromRequest: what a new share takes of each capacity."""
    out: dict[str, Quantity] = {}
    for name, cap in dev.capacity.items():
        q = consumed(requests.get(name) if requests else None, cap, fractional)
        if q is not None:
            out[name] = q
    return out


def probe_requests(dev: Device) -> dict[str, Quantity] | None:
    """draview's probe of a device: the smallest permitted share of a shareable device,
    nothing (each capacity whole) of any other."""
    if not dev.allow_multiple_allocations:
        return None
    return {name: probe_request(cap) for name, cap in dev.capacity.items()}


def capacity_fits(
    dev: Device, used: Mapping[str, Quantity] | None, fractional: bool = False
) -> bool:
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
    try:
        return request_fits(dev, probe_requests(dev), used, fractional=fractional) is True
    except CapacityError:
        return False  # the probe asks the range's own minimum: not reached with valid input


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
