"""`fit`'s answer as the documented FitResult schema (docs/fit.md), and back: what
`kubectl dra fit -o json` prints, and what the operator's explain API sends for a
FitReview (api/explanations.py), which the plugin renders as if it had computed it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from draview.api.status import API_VERSION
from draview.api.workload import Workload
from draview.explain.fit import FIT_BUDGET, FitDevice, FitResult, NodeFit, iter_nodes
from draview.explain.model import from_dict

SCHEMA_VERSION = API_VERSION  # the output schema is versioned with the CRDs
ONLY_DRA = (
    "only DRA is judged: CPU, memory, Pod affinity, node taints and other scheduler "
    "plugins may place fewer copies"
)
ANY_NODE = "any node"  # the node draview assumes when the input names no Nodes


def document(
    result: FitResult, workload: Workload, profile: str, budget: int = FIT_BUDGET
) -> dict[str, Any]:
    """The stable schema; `profile`: the label of the profile it was judged as."""
    return {
        "apiVersion": SCHEMA_VERSION,
        "kind": "FitResult",
        "workload": {
            "kind": workload.kind,
            "namespace": workload.namespace,
            "name": workload.name,
            "claimsPerCopy": [c.name for c in workload.claims],
            "sharedClaims": [c.name for c in workload.shared],
        },
        "profile": profile,
        "judged": ONLY_DRA,
        "count": result.count,
        "copies": result.copies,
        "maxCopies": result.max_copies,
        "bounded": result.bounded,
        "placementDependent": result.placement_dependent,
        "stopped": result.stopped,
        "next": {
            "summary": result.blocker,
            "claims": [e.to_dict() for e in result.blocked],
        },
        "firstCopy": {
            "node": node_name(result.first_node) if result.first else None,
            "devices": [_device(d) for d in result.first],
        },
        "nodes": [
            {
                "name": node_name(n.name),
                "copies": n.copies,
                "maxCopies": n.max_copies,
                "bounded": n.bounded,
                "devices": [_device(d) for d in n.devices],
                "devicesVary": n.devices_vary,
                **({"error": n.error} if n.error else {}),
            }
            for n in iter_nodes(result)
        ],
        "searches": {"used": result.searches, "budget": budget},
        "notes": list(result.notes),
    }


def node_name(node: str | None) -> str:
    return node if node is not None else ANY_NODE


def _device(d: FitDevice) -> dict[str, Any]:
    out: dict[str, Any] = {
        "claim": d.claim,
        "request": d.request,
        "driver": d.driver,
        "pool": d.pool,
        "device": d.device,
    }
    if d.consumed:
        out["consumedCapacity"] = dict(d.consumed)
    if d.admin_access:
        out["adminAccess"] = True
    return out


def result_of(doc: Mapping[str, Any]) -> FitResult:
    """The FitResult a document was made from, as far as the document says (enough to
    render it, and to make the same document again). ValueError for a document that is
    not one."""
    try:
        if doc.get("kind") != "FitResult":
            raise ValueError(f"kind {doc.get('kind')!r}, not FitResult")
        nodes = [
            NodeFit(
                _node(n["name"]),
                int(n["copies"]),
                _count(n.get("maxCopies")),
                bool(n.get("bounded")),
                tuple(_device_of(d) for d in n.get("devices") or ()),
                bool(n.get("devicesVary")),
                str(n.get("error") or ""),
            )
            for n in doc.get("nodes") or ()
        ]
        first = doc.get("firstCopy") or {}
        following = doc.get("next") or {}
        searches = doc.get("searches") or {}
        return FitResult(
            workload="",
            copies=int(doc["copies"]),
            max_copies=_count(doc.get("maxCopies")),
            bounded=bool(doc.get("bounded")),
            count=_count(doc.get("count")),
            nodes=nodes,
            stopped=str(doc.get("stopped") or ""),
            blocker=str(following.get("summary") or ""),
            blocked=[from_dict(e) for e in following.get("claims") or ()],
            first_node=_node(first["node"]) if first.get("node") is not None else None,
            first=tuple(_device_of(d) for d in first.get("devices") or ()),
            notes=[str(n) for n in doc.get("notes") or ()],
            searches=int(searches.get("used") or 0),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a FitResult document: {exc!r}") from exc


def _node(name: str) -> str | None:
    return None if name == ANY_NODE else str(name)


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


def _device_of(d: Mapping[str, Any]) -> FitDevice:
    return FitDevice(
        str(d["claim"]),
        str(d["request"]),
        str(d["driver"]),
        str(d["pool"]),
        str(d["device"]),
        tuple((str(k), str(v)) for k, v in (d.get("consumedCapacity") or {}).items()),
        bool(d.get("adminAccess")),
    )
