"""Consumable capacity of shareable devices (allowMultipleAllocations)."""

from __future__ import annotations

from collections.abc import Sequence

from draview.api.slices import Capacity, Device
from draview.engine.model import AllocRef
from draview.quantity import Quantity, try_parse_quantity


def smallest_request(cap: Capacity) -> Quantity | None:
    """The least one more allocation would take from this capacity.

    Without a requestPolicy an allocation takes the whole capacity; with one it takes at
    least the range minimum, the smallest valid value, or else anything above zero.
    """
    if cap.valid_min is not None:
        return try_parse_quantity(cap.valid_min)
    if cap.valid_values:
        values = [q for q in (try_parse_quantity(v) for v in cap.valid_values) if q is not None]
        return min(values) if values else None
    if cap.request_default is not None or cap.valid_max is not None:
        return None
    return try_parse_quantity(cap.value)


def shared_capacity(
    dev: Device, refs: Sequence[AllocRef]
) -> tuple[dict[str, Quantity], dict[str, Quantity], bool]:
    """(total, available, exhausted) of a shareable device given its allocations.

    Admin-access results never consume capacity.
    """
    total: dict[str, Quantity] = {}
    available: dict[str, Quantity] = {}
    exhausted = False
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
        need = smallest_request(cap)
        if left.sign() <= 0 or (need is not None and left < need):
            exhausted = True
    return total, available, exhausted
