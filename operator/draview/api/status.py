"""Output shapes: the status draview writes to its own CRDs (DESIGN §5).

TypedDicts rather than models: the engine builds hundreds of thousands of these per full
compute, and they go straight to JSON/YAML or a merge patch.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

# The identity of draview's own CRDs (deploy/crds), named here only: the operator's
# requests, its RBAC self-check and kubectl dra all read it from here, so a new version
# or kind is one edit (tests/unit/test_crds.py checks it against the CRD files).
API_GROUP = "draview.io"
CRD_VERSION = "v1alpha1"
API_VERSION = f"{API_GROUP}/{CRD_VERSION}"
SLICE_STATUS_KIND = "ResourceSliceStatus"
POOL_STATUS_KIND = "ResourcePoolStatus"
SLICE_STATUS_PLURAL = "resourceslicestatuses"
POOL_STATUS_PLURAL = "resourcepoolstatuses"
# Written per capacity probe (controller/capacity.py); not a pool's object, so not in
# PLURALS, which the writer lists and prunes.
CAPACITY_PROBE_KIND = "CapacityProbe"
CAPACITY_PROBE_PLURAL = "capacityprobes"
# kind -> plural, the form every request names
PLURALS: dict[str, str] = {
    SLICE_STATUS_KIND: SLICE_STATUS_PLURAL,
    POOL_STATUS_KIND: POOL_STATUS_PLURAL,
}

DeviceState = Literal["Available", "PartiallyAllocated", "Allocated", "Unavailable"]


class Allocation(TypedDict):
    claimNamespace: str
    claimName: str
    claimUID: str
    request: str
    adminAccess: NotRequired[bool]
    shareID: NotRequired[str]
    capacity: NotRequired[dict[str, str]]


class DeviceStatus(TypedDict):
    name: str
    state: DeviceState
    stateReason: NotRequired[str]
    allocations: NotRequired[list[Allocation]]
    # How many allocations exist when `allocations` was capped to keep objects small.
    allocationCount: NotRequired[int]
    # True when `allocations` lists fewer than allocationCount (engine/budget.py).
    allocationsTruncated: NotRequired[bool]
    capacity: NotRequired[dict[str, str]]
    availableCapacity: NotRequired[dict[str, str]]


class Summary(TypedDict):
    totalDevices: int
    allocatedDevices: int
    availableDevices: int
    partiallyAllocatedDevices: int
    unavailableDevices: int
    totalCapacity: NotRequired[dict[str, str]]
    allocatedCapacity: NotRequired[dict[str, str]]
    availableCapacity: NotRequired[dict[str, str]]


class CounterUsage(TypedDict):
    total: str
    consumed: str
    available: str


class CounterSetStatus(TypedDict):
    name: str
    counters: dict[str, CounterUsage]


class Condition(TypedDict):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str
    lastTransitionTime: NotRequired[str]


class PoolStatusBrief(TypedDict):
    """The seed's `poolStatus`, carried by the pool's first slice by name."""

    conditions: list[Condition]
    validationErrors: NotRequired[list[str]]
    observedSliceCount: int
    expectedSliceCount: int


class Partition(TypedDict):
    type: str
    attribute: str
    total: int
    available: int
    # How many more of this type could be allocated at once with the counters left.
    allocatable: int
    method: Literal["exact", "greedy", "firstFit"]


class FragmentStatus(TypedDict):
    """Free capacity that no single device can use: of a shared counter (`counterSet`,
    `counter`: the most one allocatable device takes of it), or of the consumable
    `capacity` of shareable devices (the most left on one device)."""

    counterSet: NotRequired[str]
    counter: NotRequired[str]
    capacity: NotRequired[str]
    available: str
    largest: NotRequired[str]  # absent: no allocatable device takes any of the counter
    largestDevice: NotRequired[str]
    unusable: str


class SliceStatusBody(TypedDict):
    observedGeneration: int
    devices: list[DeviceStatus]
    summary: Summary
    counterSets: NotRequired[list[CounterSetStatus]]
    poolStatus: NotRequired[PoolStatusBrief]


class SliceStatusSpec(TypedDict):
    driver: str
    pool: str
    nodeName: NotRequired[str]
    resourceSliceName: str


class ProfileStatus(TypedDict):
    kubernetesVersion: str
    allocator: str
    mirrored: bool
    featureGates: dict[str, bool]
    source: str


class PoolStatusBody(TypedDict):
    generation: int
    slices: list[str]
    observedSliceCount: int
    expectedSliceCount: int
    conditions: list[Condition]
    validationErrors: NotRequired[list[str]]
    summary: Summary
    counterSets: NotRequired[list[CounterSetStatus]]
    partitions: NotRequired[list[Partition]]
    fragmentation: NotRequired[list[FragmentStatus]]
    profile: NotRequired[ProfileStatus]


class PoolStatusSpec(TypedDict):
    driver: str
    pool: str
    nodeName: NotRequired[str]
