"""Device counts and shareable-capacity totals for a slice or a pool."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from draview.api.status import DeviceState, Summary
from draview.quantity import Quantity


def _add(into: dict[str, Quantity], name: str, q: Quantity) -> None:
    before = into.get(name)
    into[name] = q if before is None else before + q


@dataclass(slots=True)
class SummaryAcc:
    total: int = 0
    allocated: int = 0
    partial: int = 0
    available: int = 0
    unavailable: int = 0
    cap_total: dict[str, Quantity] = field(default_factory=dict)
    cap_available: dict[str, Quantity] = field(default_factory=dict)

    def add_counts(self, counts: Mapping[DeviceState, int]) -> None:
        """Count devices in: their number per state."""
        for state, n in counts.items():
            self.total += n
            if state == "Available":
                self.available += n
            elif state == "Unavailable":
                self.unavailable += n
            else:
                self.allocated += n
                if state == "PartiallyAllocated":
                    self.partial += n

    def add_capacity(self, total: dict[str, Quantity], available: dict[str, Quantity]) -> None:
        for name, q in total.items():
            _add(self.cap_total, name, q)
        for name, q in available.items():
            _add(self.cap_available, name, q)

    def render(self) -> Summary:
        out: Summary = {
            "totalDevices": self.total,
            "allocatedDevices": self.allocated,
            "availableDevices": self.available,
            "partiallyAllocatedDevices": self.partial,
            "unavailableDevices": self.unavailable,
        }
        if self.cap_total:
            out["totalCapacity"] = {k: str(v) for k, v in sorted(self.cap_total.items())}
            out["allocatedCapacity"] = {
                k: str(v - self.cap_available.get(k, v)) for k, v in sorted(self.cap_total.items())
            }
            out["availableCapacity"] = {k: str(v) for k, v in sorted(self.cap_available.items())}
        return out
