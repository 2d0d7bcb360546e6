"""What `why` reports: per request and subrequest, then the claim's verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ChoiceExplanation:
    """One request, or one firstAvailable subrequest."""

    request: str  # `gpu` or `gpu/h100` for a subrequest
    device_class: str
    allocation_mode: str
    count: int
    admin_access: bool = False
    selectors: list[str] = field(default_factory=list)
    error: str | None = None  # class missing, a selector that does not compile
    runtime_errors: dict[str, str] = field(default_factory=dict)  # device id -> message
    matched: int = 0
    # Read-only joins of per-pool lists (explain/joined.py) where the explanation was put
    # together from pools explained apart (why.Explainer keep_folds).
    free: Sequence[str] = field(default_factory=list)
    blocked: dict[str, Sequence[str]] = field(default_factory=dict)  # reason -> device ids
    # device id -> why blocked; a read-only join of per-pool maps, likewise
    details: Mapping[str, str] = field(default_factory=dict)
    best_node: str | None = None
    best_node_free: int = 0
    satisfiable: bool = False
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "request": self.request,
            "deviceClassName": self.device_class,
            "allocationMode": self.allocation_mode,
            "count": self.count,
            "selectors": list(self.selectors),
            "matchedDevices": self.matched,
            "freeDevices": len(self.free),
            "free": list(self.free),
            "blocked": {k: list(v) for k, v in sorted(self.blocked.items())},
            "satisfiable": self.satisfiable,
            "reason": self.reason,
        }
        if self.admin_access:
            out["adminAccess"] = True
        if self.error:
            out["error"] = self.error
        if self.runtime_errors:
            out["runtimeErrors"] = dict(sorted(self.runtime_errors.items()))
        if self.details:
            out["details"] = dict(sorted(self.details.items()))
        if self.best_node is not None:
            out["bestNode"] = {"name": self.best_node, "freeDevices": self.best_node_free}
        return out


@dataclass(slots=True)
class RequestExplanation:
    name: str
    prioritized: bool
    choices: list[ChoiceExplanation]

    @property
    def satisfiable(self) -> bool:
        return any(c.satisfiable for c in self.choices)

    @property
    def chosen(self) -> ChoiceExplanation | None:
        return next((c for c in self.choices if c.satisfiable), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "firstAvailable": self.prioritized,
            "satisfiable": self.satisfiable,
            "choices": [c.to_dict() for c in self.choices],
        }


@dataclass(slots=True)
class ClaimExplanation:
    namespace: str
    name: str
    allocated: bool
    node: str | None
    requests: list[RequestExplanation] = field(default_factory=list)
    constraint_problems: list[str] = field(default_factory=list)
    verdict: str = ""  # Allocated | Unallocatable | Error | MaybeAllocatable
    summary: str = ""  # one line, also the Event message

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "claim": f"{self.namespace}/{self.name}",
            "allocated": self.allocated,
            "verdict": self.verdict,
            "summary": self.summary,
            "requests": [r.to_dict() for r in self.requests],
        }
        if self.node:
            out["node"] = self.node
        if self.constraint_problems:
            out["constraints"] = list(self.constraint_problems)
        return out


def choice_from_dict(d: dict[str, Any]) -> ChoiceExplanation:
    best = d.get("bestNode") or {}
    return ChoiceExplanation(
        request=d["request"],
        device_class=d["deviceClassName"],
        allocation_mode=d["allocationMode"],
        count=d["count"],
        admin_access=bool(d.get("adminAccess")),
        selectors=list(d.get("selectors") or []),
        error=d.get("error"),
        runtime_errors=dict(d.get("runtimeErrors") or {}),
        matched=d.get("matchedDevices", 0),
        free=list(d.get("free") or []),
        blocked={k: list(v) for k, v in (d.get("blocked") or {}).items()},
        details=dict(d.get("details") or {}),
        best_node=best.get("name"),
        best_node_free=best.get("freeDevices", 0),
        satisfiable=bool(d.get("satisfiable")),
        reason=d.get("reason", ""),
    )


def from_dict(d: dict[str, Any]) -> ClaimExplanation:
    """The inverse of ClaimExplanation.to_dict: an explanation the operator sent."""
    namespace, _, name = str(d["claim"]).partition("/")
    return ClaimExplanation(
        namespace=namespace,
        name=name,
        allocated=bool(d["allocated"]),
        node=d.get("node"),
        requests=[
            RequestExplanation(
                r["name"], bool(r["firstAvailable"]), [choice_from_dict(c) for c in r["choices"]]
            )
            for r in d.get("requests") or []
        ],
        constraint_problems=list(d.get("constraints") or []),
        verdict=d.get("verdict", ""),
        summary=d.get("summary", ""),
    )
