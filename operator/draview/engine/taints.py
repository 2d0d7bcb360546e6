"""Which taints keep a device from being allocated."""

from __future__ import annotations

from collections.abc import Sequence

from draview.api.slices import Device, Taint
from draview.api.taints import DeviceTaintRule

# Effect None is informational; only these keep the scheduler away.
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def effective_taints(
    driver: str, pool: str, dev: Device, rules: Sequence[DeviceTaintRule]
) -> tuple[Taint, ...]:
    if not rules:
        return dev.taints  # most clusters: no rule, and every device is read this way
    return (*dev.taints, *(r.taint for r in rules if r.matches(driver, pool, dev.name)))


def is_blocked(taints: Sequence[Taint]) -> bool:
    return any(t.effect in BLOCKING_EFFECTS for t in taints)
