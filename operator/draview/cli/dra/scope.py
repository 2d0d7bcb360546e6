"""What a question is about (a driver, a pool, a node), as server-side selectors.

A user who asks about one node should not wait for the whole cluster to be read. The
selectors here ask the API server for a superset of what the question needs, never less:
the subcommands still apply their exact filters to what comes back, so an answer is the
same whichever way it was read. What a selector cannot express (a label value longer than
63 characters, a pool name without its driver) is simply not narrowed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from draview.api.claims import ResourceClaim
from draview.api.taints import DeviceClass
from draview.cli.dra.cluster import Query
from draview.engine.objects import LABEL_NODE

# Field selector values are compared as they are; these would end or split the selector.
_FIELD_UNSAFE = re.compile(r"[,=!\\]")
# A selector that is exactly `device.driver == "X"` (either way round, either quote).
_DRIVER_IS = re.compile(
    r"""^\s*(?:device\.driver\s*==\s*(?P<q>["'])(?P<a>[^"'\\]*)(?P=q)"""
    r"""|(?P<r>["'])(?P<b>[^"'\\]*)(?P=r)\s*==\s*device\.driver)\s*$"""
)


@dataclass(frozen=True)
class Scope:
    driver: str | None = None
    pool: str | None = None
    node: str | None = None

    @property
    def whole(self) -> bool:
        return self.driver is None and self.pool is None and self.node is None

    def status_queries(self) -> list[Query]:
        """draview's status objects that may belong to the scope: by their selectable
        fields (spec.driver, spec.pool, spec.nodeName); a network-attached pool's
        objects name no node and carry no node label."""
        fields = self._fields(pool=True)
        if self.node is None or _FIELD_UNSAFE.search(self.node):
            return [Query(fields=fields or None)]
        return [
            Query(fields=",".join(filter(None, [fields, f"spec.nodeName={self.node}"]))),
            Query(labels=f"!{LABEL_NODE}", fields=fields or None),
        ]

    def _fields(self, pool: bool) -> str:
        terms = []
        if self.driver is not None and not _FIELD_UNSAFE.search(self.driver):
            terms.append(f"spec.driver={self.driver}")
        if pool and self.pool is not None and not _FIELD_UNSAFE.search(self.pool):
            terms.append(f"spec.pool={self.pool}")
        return ",".join(terms)

    def slice_queries(self) -> list[Query]:
        """ResourceSlices that may belong to the scope: by driver, and for a node its own
        slices plus every slice that names no node (those reach nodes by selector)."""
        fields = self._fields(pool=False)  # a slice's pool is no selectable field
        if self.node is None or _FIELD_UNSAFE.search(self.node):
            return [Query(fields=fields or None)]
        return [
            Query(fields=",".join(filter(None, [fields, f"spec.nodeName={self.node}"]))),
            Query(fields=",".join(filter(None, [fields, "spec.nodeName="]))),
        ]


WHOLE = Scope()


def _driver_of(selectors: tuple[str, ...]) -> str | None:
    for expression in selectors:
        found = _DRIVER_IS.match(expression)
        if found:
            return found.group("a") if found.group("a") is not None else found.group("b")
    return None


def claim_drivers(claim: ResourceClaim, classes: Mapping[str, DeviceClass]) -> set[str] | None:
    """The drivers whose devices a claim's requests can match, when every request (each
    firstAvailable subrequest too) has a selector, of its DeviceClass or its own, that is
    exactly `device.driver == "X"`: selectors are ANDed, so no other driver's device can
    match it, and its answer does not depend on other drivers' pools. None when some
    request could match any driver (or names a class that does not exist)."""
    drivers: set[str] = set()
    for request in claim.requests:
        for choice in request.choices:
            cls = classes.get(choice.device_class_name)
            if cls is None:
                return None
            driver = _driver_of(cls.selectors) or _driver_of(choice.selectors)
            if driver is None:
                return None
            drivers.add(driver)
    return drivers or None
