"""RBAC-aware claim references: a claim the user may not `get` is shown only as a count."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from draview.cli.dra.cluster import Cluster


@dataclass
class Visibility:
    cluster: Cluster | None  # None: offline, everything is visible

    def can_see(self, namespace: str) -> bool:
        if self.cluster is None:
            return True
        # One question for a user who may read claims everywhere (an admin), instead of
        # one per namespace the answer names.
        if self.cluster.can_i("get", "resourceclaims", ""):
            return True
        return self.cluster.can_i("get", "resourceclaims", namespace)

    def split(self, allocations: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
        """(allocations the user may see, how many others there are)."""
        shown = [a for a in allocations if self.can_see(str(a.get("claimNamespace", "")))]
        return shown, len(allocations) - len(shown)

    def elide(self, allocations: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Structured output: hidden allocations keep only what is not a claim reference."""
        out = []
        for a in allocations:
            if self.can_see(str(a.get("claimNamespace", ""))):
                out.append(dict(a))
            else:
                kept = {k: v for k, v in a.items() if k in ("request", "shareID", "capacity")}
                out.append({**kept, "elided": True})
        return out

    def claims_text(self, dev: dict[str, Any]) -> str:
        """`ns/name, ns/name (+2 claims)`, or `(1 claim)` when none may be shown."""
        allocs = [a for a in dev.get("allocations") or [] if not a.get("adminAccess")]
        admin = [a for a in dev.get("allocations") or [] if a.get("adminAccess")]
        shown, hidden = self.split(allocs)
        hidden += max(0, int(dev.get("allocationCount", 0)) - len(dev.get("allocations") or []))
        names = [f"{a['claimNamespace']}/{a['claimName']}" for a in shown]
        names += [f"{a['claimNamespace']}/{a['claimName']} (admin)" for a in self.split(admin)[0]]
        if hidden:
            extra = f"{hidden} claim" + ("s" if hidden != 1 else "")
            names.append(f"(+{extra})" if names else f"({extra})")
        return ", ".join(names)
