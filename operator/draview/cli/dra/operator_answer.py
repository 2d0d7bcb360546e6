"""`why` of a pending claim, and `fit` of a workload, answered by the running operator
through its aggregated API (explain.draview.io, api/explanations.py): the leader holds
every pool judged, so the answer costs the search alone instead of reading every slice
the claim can reach (for `fit`: every slice and status object of the cluster). The
API server checks the caller's RBAC, the operator that the caller could have computed
the answer (controller/front_proxy.py). Where the API is not installed, not available or
refuses, the plugin computes the answer as before and says why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from draview.api.explanations import FIT_KIND, KIND, claim_path, fit_path, fit_review
from draview.cli.dra.cluster import Cluster
from draview.engine.profile import Profile
from draview.explain.model import ClaimExplanation, from_dict

# The API server's 404 for a group it does not serve: the explain API is not installed
# (a GET is answered with this Status; a POST with a plain "404 page not found").
NOT_SERVED = "the server could not find the requested resource"


@dataclass(frozen=True, slots=True)
class Answer:
    explanation: ClaimExplanation
    statuses: dict[str, dict[str, Any]]  # device id -> its status, for the claims holding it
    source: str  # for the note: who answered
    profile: str = ""  # the label of the profile the operator judges as


@dataclass(frozen=True, slots=True)
class FitAnswer:
    document: dict[str, Any]  # kubectl dra fit -o json's (explain/fit_document.py)
    profile: str  # the label of the profile the operator judges as
    source: str  # for the note: who answered


def _answered_by(body: dict[str, Any]) -> str:
    by = body.get("answeredBy") or {}
    return (
        f"answered by the draview operator (replica {by.get('replica', '?')}, "
        f"{by.get('pools', '?')} pools judged as {by.get('profile', '?')})"
    )


def _profile(body: dict[str, Any]) -> str:
    return str((body.get("answeredBy") or {}).get("profile") or "")


def other_profile(asked: str, flags: Profile | None) -> str | None:
    """Why an answer judged as `asked` is not one for the profile the flags name, for a
    note; None when it is, or they name none (the operator judges as the cluster's own,
    as the plugin would)."""
    if flags is None or asked == flags.label():
        return None
    return f"the draview operator judges as {asked or 'an unknown profile'}, not {flags.label()}"


def _refused(status: int, body: Any) -> str | None:
    """Why there is no answer (for a note); None when the API is not installed."""
    message = body.get("message") if isinstance(body, dict) else None
    if status == 404 and (message == NOT_SERVED or body is None):
        return None
    return str(message or f"HTTP {status}")


def ask(cluster: Cluster, namespace: str, name: str, node: str | None) -> Answer | str | None:
    """The operator's answer; else why there is none (for a note), or None when the API
    is not installed (or the transport cannot ask)."""
    params = {"node": node} if node else None
    status, body = cluster.get_path(claim_path(namespace, name), params)
    if status == 0:
        return None
    if status == 200 and isinstance(body, dict) and body.get("kind") == KIND:
        source, profile = _answered_by(body), _profile(body)
        explanation = from_dict(body["explanation"])
        return Answer(explanation, dict(body.get("devices") or {}), source, profile)
    return _refused(status, body)


@dataclass(frozen=True, slots=True)
class Invalid:
    """The operator found the workload cannot be asked about (an unknown DeviceClass...):
    computed here, the answer would be the same error."""

    message: str


def ask_fit(
    cluster: Cluster,
    namespace: str,
    objects: list[dict[str, Any]],
    count: int | None,
    budget: int,
) -> FitAnswer | Invalid | str | None:
    """The operator's answer to a FitReview of `objects` (the workload and what it
    names), or the error it found in them; else why there is none, or None when the API
    is not installed."""
    review = fit_review(namespace, objects, count, budget)
    status, body = cluster.post_path(fit_path(namespace), review)
    if status == 0:
        return None
    if status in (200, 201) and isinstance(body, dict) and body.get("kind") == FIT_KIND:
        doc = body.get("status")
        if isinstance(doc, dict):
            return FitAnswer(doc, _profile(body), _answered_by(body))
    if status == 422 and isinstance(body, dict) and body.get("reason") == "Invalid":
        return Invalid(str(body.get("message") or "the workload cannot be asked about"))
    return _refused(status, body)
