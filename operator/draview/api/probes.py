"""Capacity probe definitions: a named claim the operator keeps asking `fit` about.

Probes are defined in ConfigMaps (the chart renders one from `capacityProbes:`); each
data key ending in `.yaml` holds one probe or a list of them:

    name: mig-1g            # the CapacityProbe object and the metrics' `probe` label
    claim:                  # a ResourceClaim's spec ...
      devices: {requests: [{name: gpu, exactly: {deviceClassName: mig-1g.5gb}}]}
    template:               # ... or a ResourceClaimTemplate in the cluster
      namespace: ml
      name: mig-1g
    maxCopies: 100          # stop counting there (default: the search budget decides)
    minCopies: 4            # the example alert fires below this many
    nodeSeries: 10          # per-node series for the nodes that take the most copies

A bad definition loses nothing else: it is reported with its source, and every other
probe goes on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from draview.api.common import clip, error_text
from draview.api.workload import Workload, WorkloadError, read_workload

# A probe's name is an object name (cluster-scoped) and a label value.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
FIELDS = ("name", "claim", "template", "namespace", "maxCopies", "minCopies", "nodeSeries")
# Per-node series one probe may export: the chart documents series per probe.
MAX_NODE_SERIES = 100


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    name: str
    source: str  # "<namespace>/<configmap>:<key>", for errors and the object's spec
    claim: Mapping[str, Any] | None = None  # a ResourceClaim spec
    template: tuple[str, str] | None = None  # (namespace, name)
    namespace: str = "default"  # where the claim would live (admin access is per namespace)
    max_copies: int | None = None
    min_copies: int | None = None
    node_series: int = 0

    def spec(self) -> dict[str, Any]:
        """The CapacityProbe object's spec: the definition as read, with its source."""
        out: dict[str, Any] = {"source": self.source, "namespace": self.namespace}
        if self.claim is not None:
            out["claim"] = dict(self.claim)
        if self.template is not None:
            out["template"] = {"namespace": self.template[0], "name": self.template[1]}
        if self.max_copies is not None:
            out["maxCopies"] = self.max_copies
        if self.min_copies is not None:
            out["minCopies"] = self.min_copies
        if self.node_series:
            out["nodeSeries"] = self.node_series
        return out


@dataclass(frozen=True, slots=True)
class ProbeProblem:
    source: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


def _count(doc: Mapping[str, Any], key: str, low: int, high: int | None = None) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{key} must be an integer of at least {low} (got {value!r})")
    if high is not None and value > high:
        raise ValueError(f"{key} must be at most {high} (got {value})")
    return value


def parse_probe(doc: Any, source: str) -> ProbeSpec:
    """One definition; raises ValueError saying what is wrong."""
    if not isinstance(doc, dict):
        raise ValueError(f"a probe is a map with name and claim or template (got {doc!r})")
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(map(str, unknown))}; known: {FIELDS}")
    name = doc.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"name must be a lowercase DNS label of at most 63 characters (got {name!r})"
        )
    claim, template = doc.get("claim"), doc.get("template")
    if (claim is None) == (template is None):
        raise ValueError(f"probe {name}: give exactly one of claim and template")
    if claim is not None and not isinstance(claim, dict):
        raise ValueError(f"probe {name}: claim must be a ResourceClaim spec (a map)")
    ref: tuple[str, str] | None = None
    if template is not None:
        if not isinstance(template, dict) or not all(
            isinstance(template.get(k), str) and template.get(k) for k in ("namespace", "name")
        ):
            raise ValueError(f"probe {name}: template needs namespace and name")
        ref = (template["namespace"], template["name"])
    namespace = doc.get("namespace", ref[0] if ref else "default")
    if not isinstance(namespace, str) or not _NAME.match(namespace):
        raise ValueError(f"probe {name}: namespace must be a namespace's name (got {namespace!r})")
    try:
        return ProbeSpec(
            name=name,
            source=source,
            claim=claim,
            template=ref,
            namespace=namespace,
            max_copies=_count(doc, "maxCopies", 1),
            min_copies=_count(doc, "minCopies", 0),
            node_series=_count(doc, "nodeSeries", 0, MAX_NODE_SERIES) or 0,
        )
    except ValueError as exc:
        raise ValueError(f"probe {name}: {exc}") from None


def read_configmap(obj: Mapping[str, Any]) -> tuple[list[ProbeSpec], list[ProbeProblem]]:
    """The probes a ConfigMap defines, and what could not be read of it."""
    meta = obj.get("metadata") or {}
    where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    probes: list[ProbeSpec] = []
    problems: list[ProbeProblem] = []
    data = obj.get("data") or {}
    for key in sorted(data):
        if not key.endswith((".yaml", ".yml")):
            continue
        source = f"{where}:{key}"
        try:
            doc = yaml.safe_load(data[key])
        except yaml.YAMLError as exc:
            problems.append(ProbeProblem(source, clip(" ".join(str(exc).split()))))
            continue
        for i, item in enumerate(doc if isinstance(doc, list) else [doc]):
            if item is None:
                continue
            try:
                probes.append(parse_probe(item, source))
            except ValueError as exc:
                problems.append(ProbeProblem(f"{source}[{i}]", clip(str(exc))))
    return probes, problems


def unique(
    probes: Iterable[ProbeSpec],
) -> tuple[dict[str, ProbeSpec], list[ProbeProblem]]:
    """By name; a name defined twice keeps its first definition (by source) and reports
    the others, so that which one counts never depends on list order."""
    out: dict[str, ProbeSpec] = {}
    problems = []
    for p in sorted(probes, key=lambda p: (p.name, p.source)):
        first = out.get(p.name)
        if first is None:
            out[p.name] = p
        else:
            problems.append(
                ProbeProblem(p.source, f"probe {p.name} is already defined in {first.source}")
            )
    return out, problems


def workload_of(spec: ProbeSpec, template: Mapping[str, Any] | None) -> Workload:
    """What `fit` is asked for a probe. `template`: the ResourceClaimTemplate the probe
    names, as the cluster holds it (None: not found). Raises WorkloadError."""
    if spec.template is not None:
        if template is None:
            ns, name = spec.template
            raise WorkloadError(f'resourceclaimtemplate "{name}" not found in namespace {ns}', True)
        obj = dict(template)
        obj["kind"] = "ResourceClaimTemplate"
    else:
        obj = {"kind": "ResourceClaim", "spec": spec.claim}
    # Named after the probe, in the probe's namespace: the copies' claims would be there.
    obj["metadata"] = {"name": spec.name, "namespace": spec.namespace}
    try:
        return read_workload([obj], lambda *_: None, spec.namespace)
    except WorkloadError:
        raise
    except Exception as exc:  # a malformed spec the claim reader did not expect
        raise WorkloadError(error_text(exc)) from None
