"""Per-device checks beyond the device's state: tolerations and capacity requests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from draview.api.claims import Toleration
from draview.api.names import local_name
from draview.api.slices import Device, Taint
from draview.engine.capacity import CapacityError, consumed, violates_policy
from draview.engine.taints import BLOCKING_EFFECTS
from draview.quantity import try_parse_quantity


def tolerates(tol: Toleration, taint: Taint) -> bool:
    """core/v1 toleration semantics as DRA uses them for device taints."""
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.operator == "Exists":
        return not tol.key or tol.key == taint.key
    return tol.key == taint.key and tol.value == taint.value


def untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> list[Taint]:
    return [
        t
        for t in taints
        if t.effect in BLOCKING_EFFECTS and not any(tolerates(tol, t) for tol in tolerations)
    ]


def taint_text(t: Taint) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def capacity_problem(
    dev: Device,
    driver: str,
    requests: Mapping[str, str],
    available: Mapping[str, str] | None,
    fractional: bool = False,
) -> str | None:
    """Why the device cannot serve these capacity requests, or None when it can.

    `available` is the shareable device's capacity left (None for a whole device, which
    must simply have at least the requested amount); `fractional`: the profile works
    ranges in milli-units (rules.fractional_capacity_range)."""
    caps = {local_name(k, driver): v for k, v in dev.capacity.items()}
    for name, text in sorted(requests.items()):
        want = try_parse_quantity(text)
        cap = caps.get(local_name(name, driver))
        if want is None:
            return f"capacity request {name}={text} is not a quantity"
        if cap is None:
            return f"has no capacity {name}"
        total = try_parse_quantity(cap.value)
        if total is None:
            return f"capacity {name} is not a quantity"
        if available is None or not dev.allow_multiple_allocations:
            if want > total:
                return f"capacity {name} is {total}, request is {want}"
            continue
        # What one share takes under the requestPolicy, as the allocator rounds it.
        try:
            amount = consumed(want, cap, fractional)
        except CapacityError as exc:
            return f"capacity {name}: {exc}; the scheduler aborts the claim"
        if amount is None or violates_policy(amount, cap, fractional):
            return f"capacity {name}: requestPolicy allows no amount covering {want}"
        left = try_parse_quantity(available.get(local_name(name, driver), cap.value)) or total
        if amount > left:
            return f"capacity {name}: {left} left of {total}, request takes {amount}"
    return None
