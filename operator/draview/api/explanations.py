"""explain.draview.io: the aggregated API through which the operator answers `kubectl dra
why` for a pending claim from the pools it holds judged, instead of the caller reading
every slice of the cluster. The API server authenticates and authorizes the caller, and
proxies the request to the operator with the caller's identity (controller/explain_api.py).

One resource, `claimexplanations`, namespaced, `get` only: the name is the claim's. The
kinds and documents here are shared by the operator that serves them and the kubectl
plugin that reads them, so they cannot drift apart."""

from __future__ import annotations

from typing import Any

GROUP = "explain.draview.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
RESOURCE = "claimexplanations"
KIND = "ClaimExplanation"
# Devices `why` names per reason before "… N more"; the operator sends the status of
# the allocated ones among them (the claims holding them).
SHOWN_PER_REASON = 5


def claim_path(namespace: str, name: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/{RESOURCE}/{name}"


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
            }
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
