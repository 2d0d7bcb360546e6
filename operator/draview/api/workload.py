"""What `fit` is asked about: a ResourceClaim, a ResourceClaimTemplate, or a Pod (or the
Pod template of a Deployment, StatefulSet, ReplicaSet, DaemonSet, Job or CronJob) whose
spec.resourceClaims name templates and claims.

Each copy of the workload gets claims of its own from the templates (what the
resourceclaim controller creates for every Pod), and shares the claims named by
resourceClaimName with every other copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from draview.api.claims import READ_ERRORS, ResourceClaim
from draview.api.common import error_text

# kind -> the path from the object to its Pod spec
POD_SPEC_PATHS: Mapping[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")

# Finds a ResourceClaim or ResourceClaimTemplate by (kind, namespace, name), or None.
Lookup = Callable[[str, str, str], dict[str, Any] | None]


class WorkloadError(ValueError):
    """The workload cannot be judged. `missing`: it names an object that does not exist
    (kubectl's "not found"), rather than being malformed."""

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True, slots=True)
class Workload:
    kind: str
    name: str
    namespace: str
    # One of each for every copy, as the template (or the claim itself) specifies it.
    claims: tuple[ResourceClaim, ...]
    # Claims every copy shares (resourceClaimName), as the cluster holds them.
    shared: tuple[ResourceClaim, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.name}"


def _meta(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise WorkloadError(f"{obj.get('kind')}: metadata is not a map")
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        raise WorkloadError(f"{obj.get('kind')}: metadata.name is missing")
    return name, namespace if isinstance(namespace, str) and namespace else ""


def _claim(obj: Mapping[str, Any], namespace: str, name: str) -> ResourceClaim:
    """The claim an object specifies: a ResourceClaim's spec, or a template's spec.spec."""
    kind = obj.get("kind")
    spec = obj.get("spec")
    if kind == "ResourceClaimTemplate":
        spec = spec.get("spec") if isinstance(spec, dict) else None
    if not isinstance(spec, dict):
        raise WorkloadError(f"{kind} {namespace}/{name}: spec is missing")
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "uid": f"fit-{name}"},
        "spec": spec,
    }
    if kind == "ResourceClaim" and isinstance(obj.get("status"), dict):
        raw["status"] = obj["status"]
    try:
        claim = ResourceClaim.from_object(raw)
    except READ_ERRORS as exc:
        raise WorkloadError(f"{kind} {namespace}/{name}: {error_text(exc)}") from None
    if not claim.requests:
        raise WorkloadError(f"{kind} {namespace}/{name} requests no device: nothing to fit")
    return claim


def _pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    kind = str(obj.get("kind"))
    node: Any = obj
    for key in POD_SPEC_PATHS[kind]:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise WorkloadError(f"{kind}: {'.'.join(POD_SPEC_PATHS[kind])} is missing")
    return node


def read_workload(
    objects: Iterable[Mapping[str, Any]], lookup: Lookup, default_namespace: str = "default"
) -> Workload:
    """The workload among `objects` (the first Pod or Pod-owning kind, else the first
    claim or template); the templates and claims it names are found among `objects`
    first, then with `lookup`."""
    docs = [o for o in objects if isinstance(o, dict)]
    workload = next((o for o in docs if o.get("kind") in POD_SPEC_PATHS), None)
    if workload is None:
        workload = next((o for o in docs if o.get("kind") in CLAIM_KINDS), None)
    if workload is None:
        kinds = ", ".join(sorted({str(o.get("kind")) for o in docs})) or "nothing"
        raise WorkloadError(
            f"no workload: expected a Pod, Deployment, StatefulSet, Job, ResourceClaim or "
            f"ResourceClaimTemplate, found {kinds}"
        )
    kind = str(workload["kind"])
    name, namespace = _meta(workload)
    namespace = namespace or default_namespace
    if kind in CLAIM_KINDS:
        return Workload(kind, name, namespace, (_claim(workload, namespace, name),))

    def find(what: str, wanted: str) -> dict[str, Any]:
        for o in docs:
            if o.get("kind") != what:
                continue
            try:
                n, ns = _meta(o)
            except WorkloadError:
                continue
            if n == wanted and (ns or namespace) == namespace:
                return o
        found = lookup(what, namespace, wanted)
        if found is None:
            raise WorkloadError(
                f'{what.lower()} "{wanted}" not found in namespace {namespace}', True
            )
        return found

    entries = _pod_spec(workload).get("resourceClaims")
    if not entries:
        raise WorkloadError(
            f"{kind} {namespace}/{name} has no spec.resourceClaims: it asks for no DRA "
            "device, and only DRA is judged"
        )
    if not isinstance(entries, list):
        raise WorkloadError(f"{kind} {namespace}/{name}: spec.resourceClaims is not a list")
    claims: list[ResourceClaim] = []
    shared: list[ResourceClaim] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise WorkloadError(f"{kind} {namespace}/{name}: resourceClaims[{i}] is not a map")
        template = entry.get("resourceClaimTemplateName")
        claim = entry.get("resourceClaimName")
        if isinstance(template, str) and template:
            found = find("ResourceClaimTemplate", template)
            copy_name = f"{name}-{entry.get('name') or i}"
            claims.append(_claim(found, namespace, copy_name))
        elif isinstance(claim, str) and claim:
            shared.append(_claim(find("ResourceClaim", claim), namespace, claim))
        else:
            raise WorkloadError(
                f"{kind} {namespace}/{name}: resourceClaims[{i}] names neither a "
                "resourceClaimName nor a resourceClaimTemplateName"
            )
    return Workload(kind, name, namespace, tuple(claims), tuple(shared))
