"""`why` of a pending claim answered by the running operator, through its aggregated API
(explain.draview.io, api/explanations.py): the leader holds every pool judged, so the
answer costs the search alone instead of reading every slice the claim can reach. The
API server checks the caller's RBAC, the operator that the caller could have computed
the answer (controller/front_proxy.py). Where the API is not installed, not available or
refuses, the plugin computes the answer as before and says why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from draview.api.explanations import KIND, claim_path
from draview.cli.dra.cluster import Cluster
from draview.explain.model import ClaimExplanation, from_dict

# The API server's 404 for a group it does not serve: the explain API is not installed.
NOT_SERVED = "the server could not find the requested resource"


@dataclass(frozen=True, slots=True)
class Answer:
    explanation: ClaimExplanation
    statuses: dict[str, dict[str, Any]]  # device id -> its status, for the claims holding it
    source: str  # for the note: who answered


def ask(cluster: Cluster, namespace: str, name: str, node: str | None) -> Answer | str | None:
    """The operator's answer; else why there is none (for a note), or None when the API
    is not installed (or the transport cannot ask)."""
    params = {"node": node} if node else None
    status, body = cluster.get_path(claim_path(namespace, name), params)
    if status == 0:
        return None
    if status == 200 and isinstance(body, dict) and body.get("kind") == KIND:
        by = body.get("answeredBy") or {}
        source = (
            f"answered by the draview operator (replica {by.get('replica', '?')}, "
            f"{by.get('pools', '?')} pools judged as {by.get('profile', '?')})"
        )
        return Answer(from_dict(body["explanation"]), dict(body.get("devices") or {}), source)
    message = body.get("message") if isinstance(body, dict) else None
    if status == 404 and message == NOT_SERVED:
        return None
    return str(message or f"HTTP {status}")
