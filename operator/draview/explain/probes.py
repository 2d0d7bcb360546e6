"""The pure side of capacity probes: which pools a probe's answer depends on, the world
`fit` is asked in, and the answer as a status body and as numbers.

A probe is asked again only when a pool it depends on changed. It depends on the pools
holding a device that one of its requests' selectors (the DeviceClass's and the
request's own) match or fail on, and on the pools the profile's allocator aborts on
when met (invalid pools, from 1.34's rules); a probe with a request for all matching
devices depends on every pool (the allocator refuses it on a node where any pool is
incomplete). Every other pool holds nothing a copy could take or trip on, so `fit` asked
with those pools left out gives the same copies, per-node copies and devices
(tests/fidelity/test_probe_pools.py compares the two on random worlds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from draview.api.common import clip
from draview.api.slices import ResourceSlice
from draview.api.taints import DeviceClass
from draview.api.workload import Workload
from draview.cel import CelCompileError, CelEngine, CelRuntimeError
from draview.explain.fit import FitResult

# Nodes a status lists (the per-node series are a probe's own choice, up to 100).
STATUS_NODES = 20
Selectors = tuple[tuple[str, ...], ...]


def selectors(workload: Workload, classes: Mapping[str, DeviceClass]) -> Selectors:
    """Per request choice (every subrequest of a prioritized list), the selectors a
    device must pass: its DeviceClass's, then its own. A class that does not exist adds
    nothing: `fit` refuses the probe before any pool is looked at."""
    out = []
    for claim in workload.claims:
        for req in claim.requests:
            for ch in req.choices:
                cls = classes.get(ch.device_class_name)
                if cls is not None:
                    out.append((*cls.selectors, *ch.selectors))
    return tuple(out)


def every_pool(workload: Workload) -> bool:
    """Whether the probe depends on every pool: a request for all matching devices
    fails on a node where some pool is incomplete or invalid, whatever its devices."""
    return any(
        ch.allocation_mode == "All"
        for claim in workload.claims
        for req in claim.requests
        for ch in req.choices
    )


def pool_signature(slices: Sequence[ResourceSlice]) -> tuple[tuple[str, int], ...]:
    """What a pool's relevance depends on: its slices, each at its generation."""
    return tuple(sorted((s.name, s.generation) for s in slices))


def pool_relevant(sels: Selectors, slices: Iterable[ResourceSlice], cel: CelEngine) -> bool:
    """Whether some device of the slices passes, or fails with an error on, every
    selector of some request choice. The results are cached in `cel` under the key the
    search uses (driver, pool, slice, generation, device), so asking again after an
    allocation changed costs a lookup a device."""
    matchers = [cel.matcher(sel) for sel in sels]
    for s in slices:
        for d in s.devices:
            key = (s.driver, s.pool.name, s.name, s.generation, d.name)
            for match in matchers:
                try:
                    found = match(s.driver, d, key)
                except CelCompileError:
                    return True  # every copy fails on it: the search meets it
                if found is True or isinstance(found, CelRuntimeError):
                    return True
    return False


class ProbeNode(TypedDict):
    name: str
    copies: int
    maxCopies: NotRequired[int]


class ProbeStatus(TypedDict):
    """A CapacityProbe's status (deploy/crds/draview.io_capacityprobes.yaml)."""

    copies: NotRequired[int]
    maxCopies: NotRequired[int]
    bounded: NotRequired[bool]
    stopped: NotRequired[str]
    blocker: NotRequired[str]
    firstNode: NotRequired[str]
    nodes: NotRequired[list[ProbeNode]]
    nodeCount: NotRequired[int]
    notes: NotRequired[list[str]]
    error: NotRequired[str]
    profile: str


@dataclass(frozen=True, slots=True)
class Answer:
    """What a probe exports: its status body and the numbers of its series."""

    status: ProbeStatus
    copies: int | None  # None: the probe has no answer (its error says why)
    max_copies: int | None
    bounded: bool
    per_node: tuple[tuple[str, int], ...]  # the nodes that take the most copies, for series


def answer(result: FitResult, profile: str, node_series: int) -> Answer:
    fitting = result.ranked  # in iter_nodes' order, kept as nodes change
    nodes = fitting[: max(STATUS_NODES, node_series)]
    listed: list[ProbeNode] = []
    for n in nodes[:STATUS_NODES]:
        entry = ProbeNode(name=n.name or "", copies=n.copies)
        if n.max_copies is not None and n.max_copies != n.copies:
            entry["maxCopies"] = n.max_copies
        listed.append(entry)
    # Stopped at maxCopies, the count is a lower bound as much as when the budget ends.
    bounded = result.bounded or result.stopped == "count"
    status = ProbeStatus(
        copies=result.copies,
        bounded=bounded,
        stopped=result.stopped,
        blocker=clip(result.blocker, 1024),
        nodes=listed,
        nodeCount=len(fitting),
        profile=profile,
    )
    if result.max_copies is not None:
        status["maxCopies"] = result.max_copies
    if result.first_node:
        status["firstNode"] = result.first_node
    if result.notes:
        status["notes"] = [clip(n, 512) for n in result.notes]
    per_node = tuple((n.name or "", n.copies) for n in nodes[:node_series])
    return Answer(status, result.copies, result.max_copies, bounded, per_node)


def failed(message: str, profile: str) -> Answer:
    """A probe that cannot be asked (a bad definition, a template not found, an unknown
    DeviceClass): its status says why and it exports no count."""
    return Answer(ProbeStatus(error=clip(message, 1024), profile=profile), None, None, False, ())
