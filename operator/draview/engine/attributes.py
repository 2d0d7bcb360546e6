"""Device attribute lookup with Kubernetes' qualified-name rules."""

from __future__ import annotations

from typing import Any

from draview.api.names import lookup
from draview.api.slices import Device

AttrValue = str | int | bool


def scalar(raw: Any) -> AttrValue | None:
    """The value of an attribute written as {string|int|bool|version: x}."""
    if isinstance(raw, dict):
        for kind in ("string", "int", "bool", "version"):
            if kind in raw:
                v = raw[kind]
                return v if isinstance(v, (str, int, bool)) else str(v)
        return None
    return raw if isinstance(raw, (str, int, bool)) else None


def attribute(dev: Device, driver: str, name: str) -> AttrValue | None:
    """`name` may be qualified (`gpu.example.com/profile`) or not (api.names)."""
    raw = lookup(dev.attributes, driver, name)
    return None if raw is None else scalar(raw)
