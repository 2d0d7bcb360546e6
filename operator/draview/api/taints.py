"""DeviceTaintRule (v1alpha3, v1beta2, v1) and DeviceClass, normalised."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from draview.api.common import Model, cel_expressions
from draview.api.slices import Taint


class DeviceTaintRule(Model):
    """Taints every device matching {driver, pool, device}; an unset field matches all."""

    name: str
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    taint: Taint

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> DeviceTaintRule:
        spec = obj.get("spec") or {}
        sel = spec.get("deviceSelector") or {}
        return cls.model_validate(
            {
                "name": (obj.get("metadata") or {}).get("name") or "",
                "driver": sel.get("driver") or None,
                "pool": sel.get("pool") or None,
                "device": sel.get("device") or None,
                "taint": spec.get("taint") or {},
            }
        )

    def matches(self, driver: str, pool: str, device: str | None = None) -> bool:
        """Whether the rule taints the device; with no device, whether it may taint some
        device of the pool (which pools a rule change dirties)."""
        return (
            (self.driver is None or self.driver == driver)
            and (self.pool is None or self.pool == pool)
            and (self.device is None or device is None or self.device == device)
        )


class DeviceClass(Model):
    name: str
    selectors: tuple[str, ...] = ()
    extended_resource_name: str | None = Field(None, alias="extendedResourceName")

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> DeviceClass:
        spec = obj.get("spec") or {}
        return cls.model_validate(
            {
                "name": (obj.get("metadata") or {}).get("name") or "",
                "selectors": cel_expressions(spec.get("selectors")),
                "extendedResourceName": spec.get("extendedResourceName"),
            }
        )
