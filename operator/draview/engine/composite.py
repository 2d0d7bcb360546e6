"""The composite-device draft (seed 003): devices that draw capacity from a source device.

A source is unavailable while any device below it is in use; a sink is unavailable while
a device above it is in use, or when what is left of an ancestor's capacity (after the
in-use devices below it) is less than the sink needs.
"""

from __future__ import annotations

from collections.abc import Iterable

from draview.api.slices import Device
from draview.quantity import Quantity, try_parse_quantity


def _caps(dev: Device) -> dict[str, Quantity]:
    parsed = {name: try_parse_quantity(cap.value) for name, cap in dev.capacity.items()}
    return {name: q for name, q in parsed.items() if q is not None}


class CompositeGraph:
    def __init__(self, devices: Iterable[Device], in_use: set[str]) -> None:
        self.devices = {d.name: d for d in devices}
        self.parent = {
            d.name: d.consumes_capacity_from[0]
            for d in self.devices.values()
            if d.consumes_capacity_from and d.consumes_capacity_from[0] != d.name
        }
        self.in_use = in_use
        self.sink_in_use: set[str] = set()
        self.pulled: dict[str, dict[str, Quantity]] = {}
        for name in in_use:
            if name not in self.devices:
                continue
            caps = _caps(self.devices[name])
            for anc in self.ancestors(name):
                self.sink_in_use.add(anc)
                pulled = self.pulled.setdefault(anc, {})
                for cname, q in caps.items():
                    pulled[cname] = pulled[cname] + q if cname in pulled else q

    def ancestors(self, name: str) -> list[str]:
        out: list[str] = []
        seen = {name}
        while name in self.parent:
            name = self.parent[name]
            if name in seen:  # a cycle: the draft forbids it; stop rather than loop
                break
            seen.add(name)
            out.append(name)
        return out

    def blocked(self, dev: Device) -> bool:
        if dev.name in self.sink_in_use:
            return True
        need = _caps(dev)
        for anc in self.ancestors(dev.name):
            if anc in self.in_use:
                return True
            source = self.devices.get(anc)
            if source is None:
                continue
            have = _caps(source)
            pulled = self.pulled.get(anc, {})
            for cname, q in need.items():
                if cname in have and cname in pulled and have[cname] - pulled[cname] < q:
                    return True
        return False
