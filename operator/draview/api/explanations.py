"""explain.draview.io: the aggregated API through which the operator answers `kubectl dra
why` for a pending claim from the pools it holds judged, instead of the caller reading
every slice of the cluster. The API server authenticates and authorizes the caller, and
proxies the request to the operator with the caller's identity (controller/explain_api.py).

Two resources, both namespaced:
- `claimexplanations`, `get` only: the name is the claim's;
- `fitreviews`, `create` only: `kubectl dra fit` sends the workload's objects (and the
  templates and claims it names, as the caller read them) and gets `fit`'s answer back in
  the status, as `kubectl dra fit -o json` prints it (explain/fit_document.py).
The kinds and documents here are shared by the operator that serves them and the kubectl
plugin that reads them, so they cannot drift apart."""

from __future__ import annotations

from typing import Any

GROUP = "explain.draview.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
RESOURCE = "claimexplanations"
KIND = "ClaimExplanation"
FIT_RESOURCE = "fitreviews"
FIT_KIND = "FitReview"
# The most node searches one FitReview may spend: the operator's CPU is shared with its
# own work. The plugin computes a larger budget's answer itself.
MAX_FIT_BUDGET = 100_000
# Devices `why` names per reason before "… N more"; the operator sends the status of
# the allocated ones among them (the claims holding them).
SHOWN_PER_REASON = 5


def claim_path(namespace: str, name: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/{RESOURCE}/{name}"


def fit_path(namespace: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/{FIT_RESOURCE}"


def _version() -> dict[str, str]:
    return {"groupVersion": API_VERSION, "version": VERSION}


def group() -> dict[str, Any]:
    """GET /apis/explain.draview.io."""
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": [_version()],
        "preferredVersion": _version(),
    }


def group_list() -> dict[str, Any]:
    """GET /apis: the API server merges this into its own discovery."""
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group()]}


def resource_list() -> dict[str, Any]:
    """GET /apis/explain.draview.io/v1alpha1."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": API_VERSION,
        "resources": [
            {
                "name": RESOURCE,
                "singularName": "claimexplanation",
                "namespaced": True,
                "kind": KIND,
                "verbs": ["get"],
            },
            {
                "name": FIT_RESOURCE,
                "singularName": "fitreview",
                "namespaced": True,
                "kind": FIT_KIND,
                "verbs": ["create"],
            },
        ],
    }


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A metav1 Status: kubectl and the plugin print its message as they do the API's."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def explanation_object(
    namespace: str,
    name: str,
    explanation: dict[str, Any],
    devices: dict[str, dict[str, Any]],
    answered_by: dict[str, Any],
) -> dict[str, Any]:
    """A ClaimExplanation: `explanation` is what `kubectl dra why -o json` prints;
    `devices` the status (allocations) of each device it names as allocated, so that the
    plugin shows claim names only where its caller may read them; `answeredBy` the
    replica, the profile it judges as and how many pools it holds."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "answeredBy": answered_by,
        "explanation": explanation,
        "devices": devices,
    }


def fit_review(
    namespace: str, objects: list[dict[str, Any]], count: int | None, budget: int
) -> dict[str, Any]:
    """A FitReview to create: `objects` hold the workload and what it names."""
    spec: dict[str, Any] = {"objects": objects, "budget": budget}
    if count is not None:
        spec["count"] = count
    return {
        "apiVersion": API_VERSION,
        "kind": FIT_KIND,
        "metadata": {"namespace": namespace},
        "spec": spec,
    }


def read_fit_review(body: Any) -> tuple[list[dict[str, Any]], int | None, int]:
    """The objects, count and budget of a FitReview; ValueError saying what is wrong."""
    if not isinstance(body, dict) or body.get("kind") != FIT_KIND:
        raise ValueError(f"the body is not a {FIT_KIND}")
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise ValueError(f"{FIT_KIND}: spec is not a map")
    objects = spec.get("objects")
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise ValueError(f"{FIT_KIND}: spec.objects is not a list of objects")
    count, budget = spec.get("count"), spec.get("budget")
    for field, value in (("count", count), ("budget", budget)):
        if value is not None and (type(value) is not int or value < 1):
            raise ValueError(f"{FIT_KIND}: spec.{field} must be a positive integer")
    if budget is None:
        raise ValueError(f"{FIT_KIND}: spec.budget is required")
    if budget > MAX_FIT_BUDGET:
        raise ValueError(f"{FIT_KIND}: spec.budget is above the operator's {MAX_FIT_BUDGET}")
    return objects, count, budget


def fit_review_answer(
    review: dict[str, Any], document: dict[str, Any], answered_by: dict[str, Any]
) -> dict[str, Any]:
    """The FitReview created: as asked, with `fit`'s answer (explain/fit_document.py) and
    who answered (as for a ClaimExplanation)."""
    return {**review, "answeredBy": answered_by, "status": document}
