"""What the plugin asks of a cluster, whichever way it reaches it: the API server
directly (rest.py, the default) or kubectl as a child process (kubectl.py, --kubectl).

The kinds it reads, the errors callers handle, and the profile (release and DRA gates)
both ways compute alike.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from draview.api.status import API_GROUP, CRD_VERSION, PLURALS, POOL_STATUS_KIND, SLICE_STATUS_KIND
from draview.cli.dra.common import CliError
from draview.engine.profile import (
    GateNames,
    Profile,
    ProfileError,
    cluster_profile,
    gates_from_metrics,
    sort_gates,
)

RESOURCE_GROUP = "resource.k8s.io"


@dataclass(frozen=True)
class Kind:
    group: str  # "" for the core group
    plural: str
    namespaced: bool
    version: str | None = None  # None: the group's served version that has the plural

    @property
    def resource(self) -> str:
        """The name kubectl takes: `resourceslices.resource.k8s.io`, `nodes`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


KINDS: dict[str, Kind] = {
    "ResourceSlice": Kind(RESOURCE_GROUP, "resourceslices", False),
    "ResourceClaim": Kind(RESOURCE_GROUP, "resourceclaims", True),
    "ResourceClaimTemplate": Kind(RESOURCE_GROUP, "resourceclaimtemplates", True),
    "DeviceClass": Kind(RESOURCE_GROUP, "deviceclasses", False),
    "DeviceTaintRule": Kind(RESOURCE_GROUP, "devicetaintrules", False),
    "Node": Kind("", "nodes", False, "v1"),
    SLICE_STATUS_KIND: Kind(API_GROUP, PLURALS[SLICE_STATUS_KIND], False, CRD_VERSION),
    POOL_STATUS_KIND: Kind(API_GROUP, PLURALS[POOL_STATUS_KIND], False, CRD_VERSION),
}


class NotServed(CliError):
    """The API server does not serve the resource (a CRD is not installed)."""


class Forbidden(CliError):
    """RBAC does not allow the request."""


class NotFound(CliError):
    """The named object does not exist."""


@dataclass(frozen=True)
class Query:
    """Which objects of a kind: server-side selectors, as `kubectl get -l/--field-selector`."""

    labels: str | None = None
    fields: str | None = None


EVERYTHING = Query()


def _field(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def matches(obj: dict[str, Any], query: Query) -> bool:
    """The query's selectors as the API server applies them, for objects read already (a
    dump, or a kind listed whole). The forms the plugin writes: `k=v`, `k!=v`, `k`, `!k`
    for labels; `path=v`, `path!=v` for fields; terms joined by commas."""
    if not query.labels and not query.fields:
        return True
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    labels = labels if isinstance(labels, dict) else {}
    for term in filter(None, (query.labels or "").split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            ok = labels.get(k.strip()) != v.strip()
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            ok = labels.get(k.strip()) == v.strip()
        elif term.strip().startswith("!"):
            ok = term.strip()[1:] not in labels
        else:
            ok = term.strip() in labels
        if not ok:
            return False
    for term in filter(None, (query.fields or "").split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            ok = _field(obj, k.strip()) != v.strip()
        else:
            k, v = term.replace("==", "=").split("=", 1)
            ok = _field(obj, k.strip()) == v.strip()
        if not ok:
            return False
    return True


class Cluster(ABC):
    """A live cluster as the subcommands read it."""

    # How the gates the cluster reports stand (cluster_profile): what was left out.
    gate_names: GateNames | None = None

    @abstractmethod
    def list(self, kind: str, query: Query = EVERYTHING) -> list[dict[str, Any]]:
        """Every object of a kind that the query selects, in all namespaces."""

    def any(self, kind: str) -> bool:
        """Whether at least one object of the kind exists and may be listed."""
        try:
            return bool(self.list(kind))
        except (NotServed, Forbidden):
            return False

    @abstractmethod
    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object; NotFound when it is not there."""

    @abstractmethod
    def can_i(self, verb: str, resource: str, namespace: str) -> bool:
        """Whether RBAC lets the user do it ('' namespace: in every namespace)."""

    @abstractmethod
    def versions(self) -> tuple[str | None, str | None, str]:
        """The client's and the server's gitVersion (None where unknown), and why the
        server's could not be read."""

    @abstractmethod
    def metrics(self) -> str | None:
        """The API server's `kubernetes_feature_enabled` lines; None when unreadable."""

    @abstractmethod
    def default_namespace(self) -> str:
        """The context's namespace, else `default`."""

    @property
    @abstractmethod
    def transport(self) -> str:
        """How it is reached, for `version` and notes: 'API server' or 'kubectl'."""

    def get_path(self, path: str, params: dict[str, str] | None = None) -> tuple[int, Any]:
        """GET an API path: (HTTP status, the decoded JSON body or None). A transport
        that cannot ask (kubectl's) answers (0, None)."""
        return 0, None

    def post_path(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """POST a JSON body to an API path: as get_path."""
        return 0, None

    def progress_done(self) -> None:  # noqa: B027 (most transports show no progress)
        """A read ended: clear a progress line before anything else is printed."""

    def cluster_profile(self) -> Profile:
        """The cluster's release (/version) and DRA gates (/metrics of the API server);
        where /metrics may not be read, the release's defaults (the source says so)."""
        _, version, why = self.versions()
        if version is None:
            raise CliError(f"cannot read the server's version: {why}")
        text = self.metrics()
        try:
            profile = cluster_profile(version, text)
        except ProfileError as exc:
            raise CliError(str(exc)) from None
        self.gate_names = sort_gates(profile.release, gates_from_metrics(text or ""))
        return profile
