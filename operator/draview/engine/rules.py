"""Which allocator rule holds for which profile: the one table of release and gate rules.

Each rule names what the allocator (or the scheduler around it) does, the gate or
release it hangs on, and where in the Kubernetes sources that was read. The engine asks
`rules_for(profile)`, never a release number. Differential runs against each release's
allocator (e2e/oracle, built per release) check every row.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Final

from draview.api.claims import ResourceClaim
from draview.api.slices import CounterConsumption
from draview.engine.flatten import FlatSlice
from draview.engine.profile import DEFAULT, Profile


@dataclass(frozen=True, slots=True)
class Rules:
    """One flag per rule; the default is 1.36's with every gate on. What each rule says,
    when it holds and where upstream it was read: TABLE (one row per field)."""

    taints: bool = True
    taint_rules: bool = True
    partitionable: bool = True
    shareable: bool = True
    invalid_pool_is_node_local: bool = True
    pools_sorted: bool = True
    search_resumes: bool = True
    distinct_by_value: bool = True
    list_type_attributes: bool = True
    counter_slices_everywhere: bool = True
    node_slices_first: bool = True
    check_slices_in_pool: bool = True
    incomplete_pools_refused: bool = True
    counters_per_pool: bool = True
    shares_skip_counter_check: bool = True
    empty_shares_stay: bool = False
    unpartitioned_skips_counter_slices: bool = True
    counter_slices_hold_no_devices: bool = True
    capacity_recheck_own_device: bool = True
    shares_debit_once: bool = False
    shares_debit_counters: bool = True
    refusals_release_counters: bool = True
    counters_by_pool_id: bool = True
    all_mode_static_capacity: bool = False
    admin_access: bool = True
    prioritized_list: bool = True
    capacity_requests_refused: bool = False
    binding_conditions: bool = True
    binding_slices_last: bool = False
    binding_pools_last: bool = True
    fractional_capacity_range: bool = False
    compatibility_groups: bool = False
    compatibility_groups_skip_slices: bool = False
    node_operations_checked: bool = False
    optional_node_operations: bool = False
    includes_function: bool = True
    list_constraints: bool = False
    distinct_every_device: bool = False
    derived_attributes: bool = False
    derived_attributes_refused: bool = False


# The rules docs/semantics.md describes (1.36 with every gate on); `differences` is
# measured from them.
REFERENCE: Final = Rules()

# name -> (what it says, when it holds, read from)
TABLE: Final[dict[str, tuple[str, str, str]]] = {
    "taints": (
        "NoSchedule/NoExecute device taints block allocation",
        "Features.DeviceTaints (gate DRADeviceTaints; default on from 1.36)",
        "structured/internal/*/allocator_*.go: taintPreventsAllocation",
    ),
    "taint_rules": (
        "DeviceTaintRules add taints to the devices they select",
        "1.34: DRADeviceTaints; 1.35+: DRADeviceTaintRules (default on from 1.37)",
        "pkg/scheduler/scheduler.go: resourceslicetracker.Options",
    ),
    "partitionable": (
        "slices with sharedCounters or perDeviceNodeSelection are gathered; devices may "
        "consume counters",
        "Features.PartitionableDevices (gate DRAPartitionableDevices; default on from 1.36)",
        "structured/internal/*/pools_*.go: GatherPools; allocateDevice",
    ),
    "shareable": (
        "allowMultipleAllocations makes a device shareable and results with a shareID are "
        "shares (else every device is exclusive and a share holds it whole)",
        "Features.ConsumableCapacity (gate DRAConsumableCapacity; default on from 1.36)",
        "plugins/dynamicresources/dra_manager.go: GatherAllocatedState; allocateDevice",
    ),
    "invalid_pool_is_node_local": (
        "an invalid pool fails only the node whose view holds it",
        "1.35+ (ErrFailedAllocationOnNode); 1.34 aborts the scheduling attempt",
        "plugins/dynamicresources/dynamicresources.go: Filter",
    ),
    "pools_sorted": (
        "GatherPools returns the pools sorted by driver and pool name and each pool's "
        "slices sorted by name, so the first-fit search meets devices in one fixed order",
        "1.36+ (1.34 and 1.35 return the pools in Go map order, new on every Allocate "
        "call, and a pool's slices in the order the scheduler listed them)",
        "structured/internal/*/pools_*.go: GatherPools (sortPoolsByID, sortSlicesByName)",
    ),
    "search_resumes": (
        "allocateOne looks for a request's next device after the one it took last",
        "1.36+ (startLocation; 1.34 and 1.35 walk every pool again from the first one "
        "for each device)",
        "structured/internal/*/allocator_*.go: allocateOne",
    ),
    "distinct_by_value": (
        "distinctAttribute refuses a device whose value another device of the claim has",
        "1.35+ (1.34 compares the values' pointers: only the same device taken again, a "
        "shareable one, repeats a value)",
        "structured/internal/experimental/constraint.go: matchesAttribute",
    ),
    "list_type_attributes": (
        "CEL sees a list-typed attribute as a list (else any selector evaluated on a "
        "device with one is a runtime error: unsupported attribute value)",
        "1.37 whatever the gate; 1.36 with DRAListTypeAttributes (the gate reaches the CEL "
        "cache only); 1.34-1.35 have no list fields",
        "cel/compile.go: getAttributeValue; plugins/dynamicresources/dynamicresources.go: "
        "cel.NewCache Features",
    ),
    "counter_slices_everywhere": (
        "slices with sharedCounters reach every node; in 1.34 and from 1.37 only the "
        "nodes they select (from 1.37 the others join when a node's view looks incomplete)",
        "1.35-1.36 (1.37 changed GatherPools and the slices handed to it)",
        "structured/internal/*/pools_*.go: GatherPools, buildPool; allocator_*.go: Allocate",
    ),
    "node_slices_first": (
        "GatherPools meets the node's own slices (by nodeName) before the others, so "
        "their resourceSliceCount decides completeness; before, the list order alone",
        "1.36+ (1.34 and 1.35 hand GatherPools every slice in the order listed)",
        "structured/internal/*/allocator_*.go: Allocate (slicesOnNode, slicesShared)",
    ),
    "check_slices_in_pool": (
        "a node's view that looks incomplete is completed (or made obsolete) by the "
        "pool's slices the node does not gather",
        "1.35+ (1.34 judges a pool by the slices the node gathers alone)",
        "structured/internal/*/pools_*.go: GatherPools, checkSlicesInPool",
    ),
    "incomplete_pools_refused": (
        "an incomplete pool hands out no device",
        "1.35+ (1.34 allocates from it; only allocationMode All fails on one)",
        "structured/internal/*/pools_*.go: GatherPools; allocator_*.go: allocateOne",
    ),
    "counters_per_pool": (
        "counter sets belong to the pool: a device may consume those of another slice, "
        "and the counters of every allocated device of the pool are debited",
        "1.35+ (1.34 keeps them per slice: a device answers only to its own slice's "
        "counter sets, and one of them overdrawn refuses only that slice's devices)",
        "structured/internal/*/allocator_*.go: checkAvailableCounters",
    ),
    "shares_skip_counter_check": (
        "a shareable device whose shares already hold capacity skips the counter check",
        "1.35+ (1.34 checks the counters for every share)",
        "structured/internal/*/allocator_*.go: allocateDevice (skipCounterCheck)",
    ),
    "empty_shares_stay": (
        "a share of a device without capacity, given back while backtracking, keeps the "
        "device counted as capacity in use for the rest of the Allocate call, so its "
        "later shares skip the counter check",
        "1.35's experimental allocator (it takes back only shares with consumed capacity; "
        "1.34 checks the counters for every share anyway; 1.36+ take back every share)",
        "structured/internal/experimental/allocator_experimental.go: allocateDevice "
        "(the deallocate func: requestedResource != nil), ConsumedCapacityCollection.Insert",
    ),
    "unpartitioned_skips_counter_slices": (
        "with partitionable devices off GatherPools skips slices with sharedCounters",
        "1.35+ (1.34 skips only slices with perDeviceNodeSelection)",
        "structured/internal/*/pools_*.go: GatherPools",
    ),
    "counter_slices_hold_no_devices": (
        "with partitionable devices on, a slice with sharedCounters is read for its "
        "counter sets only: devices beside them (1.34's layout, which a 1.35+ API server "
        "no longer accepts but keeps through an upgrade) are never allocated, nor checked "
        "for duplicate names",
        "1.35+ (1.34 keeps counter sets beside devices in one slice)",
        "structured/internal/*/pools_*.go: buildPool (counterSetSlices, deviceSlices)",
    ),
    "capacity_recheck_own_device": (
        "allocateDevice checks the request against the capacity of the device it takes",
        "1.35+ (1.34 checks it a second time against the slice's device at the index "
        "of the request's device count, the first device for a claim of one: its "
        "capacities, shares and policies)",
        "structured/internal/experimental/allocator_experimental.go: allocateDevice",
    ),
    "shares_debit_once": (
        "a share without consumedCapacity marks its device's counters as debited, so "
        "further shares skip the counter check",
        "1.37 (until 1.36 every such share charged the counters again: CountersChargedPerShare)",
        "structured/internal/*/allocator_*.go: deviceCapacityInUse",
    ),
    "shares_debit_counters": (
        "a device held only by results with a shareID debits its counters like one held whole",
        "1.36+ (IsDeviceAllocated); 1.35's experimental allocator counts AllocatedDevices "
        "only, so shares leave the counters untouched",
        "structured/internal/*/allocator_*.go: checkAvailableCounters",
    ),
    "refusals_release_counters": (
        "a device refused after its counters were reserved (a taint, a constraint) gives "
        "them back, and so does a share undone while backtracking",
        "1.36+ (rollbackDevice); until 1.35 they stay reserved for the rest of the "
        "Allocate call, so a tainted device can block the devices after it",
        "structured/internal/*/allocator_*.go: allocateDevice",
    ),
    "counters_by_pool_id": (
        "one Allocate call keeps the counters its search takes per driver and pool",
        "1.36.6+ and 1.37 (the patch draview tracks; before, per pool name alone)",
        "structured/internal/*/allocator_*.go: availableCounters, consumedCounters",
    ),
    "all_mode_static_capacity": (
        "allocationMode All counts every matching device whose static capacity takes the "
        "request; one with too little left then fails the request",
        "1.37 (until 1.36 such a device was left out of 'all')",
        "structured/internal/*/allocator_*.go: newRequestData, DeviceAllocationModeAll",
    ),
    "admin_access": (
        "a request may ask for admin access (else the claim is refused)",
        "Features.AdminAccess (gate DRAAdminAccess; default on from 1.34)",
        "structured/internal/*/allocator_*.go: Allocate",
    ),
    "prioritized_list": (
        "a request may list firstAvailable alternatives (else the claim is refused)",
        "Features.PrioritizedList (gate DRAPrioritizedList; default on from 1.34)",
        "structured/internal/*/allocator_*.go: Allocate",
    ),
    "capacity_requests_refused": (
        "with sharing off, a request with capacity is refused (an implementation that does "
        "not know consumable capacity, 1.35's incubating, ignores it instead)",
        "ConsumableCapacity off in an implementation that supports it",
        "structured/internal/*/allocator_*.go: Allocate",
    ),
    "binding_conditions": (
        "a device with bindingConditions may be allocated (else it is never selectable)",
        "Features.DeviceBindingAndStatus (gates DRADeviceBindingConditions and "
        "DRAResourceClaimDeviceStatus; 1.34: DeviceBinding and DeviceStatus; default on from "
        "1.36)",
        "structured/internal/*/allocator_*.go: isSelectable",
    ),
    "binding_slices_last": (
        "GatherPools adds a node's slices holding devices with bindingConditions after the "
        "others, so one of those is met first only when nothing else is",
        "the experimental allocator of 1.34 and 1.35",
        "structured/internal/experimental/pools_experimental.go: GatherPools",
    ),
    "binding_pools_last": (
        "pools holding devices with bindingConditions are searched after the others",
        "1.36+, and 1.34's and 1.35's experimental allocator (not 1.35's incubating)",
        "structured/internal/*/pools_*.go: GatherPools (resultWithBindingConditions)",
    ),
    "fractional_capacity_range": (
        "a validRange whose bounds all have milli precision rounds requests in milli-units "
        "(else in whole units, Quantity.Value() rounding up)",
        "Features.FractionalCapacityRange (gate DRAFractionalCapacityRange, 1.37, default on)",
        "structured/internal/*/consumable_capacity.go: roundUpRange, useMilli",
    ),
    "compatibility_groups": (
        "devices drawing from one counter set at once must share a compatibility group "
        "(devices that name none only go with others that name none)",
        "Features.CompatibilityGroups (gate DRADeviceCompatibilityGroups, 1.37, alpha)",
        "structured/internal/experimental/allocator_experimental.go: "
        "checkAndConsumeCompatibilityGroups",
    ),
    "compatibility_groups_skip_slices": (
        "slices whose devices name compatibility groups are skipped and do not count towards "
        "resourceSliceCount (their pool looks incomplete)",
        "1.37 without Features.CompatibilityGroups (until 1.36 the field does not exist "
        "and is dropped)",
        "structured/internal/*/pools_*.go: GatherPools, slicesWithoutCompatibilityGroups",
    ),
    "node_operations_checked": (
        "a device of a slice with skipNodeOperations is refused unless the scheduler has "
        "optional node operations and the node declares them (else the field is not read)",
        "1.37's experimental allocator (the field exists from 1.37)",
        "structured/internal/experimental/allocator_experimental.go: allocateDevice",
    ),
    "optional_node_operations": (
        "such a device is allocatable on nodes whose status.declaredFeatures has "
        "DRAOptionalNodeOperations",
        "Features.OptionalNodeOperations (gate DRAOptionalNodeOperations, 1.37, alpha)",
        "structured/internal/experimental/allocator_experimental.go: allocateDevice",
    ),
    "includes_function": (
        "CEL selectors may call includes() (stored expressions see it whatever the gate)",
        "1.36+",
        "cel/compile.go: newCompiler (IncludesOption; StoredExpressions ignores FeatureEnabled)",
    ),
    "list_constraints": (
        "matchAttribute keeps the values every device shares (a single value counts as a "
        "set of one, kinds must agree) and fails once none is left; distinctAttribute wants "
        "sets with no value in common; else values compare one to one and a list never "
        "matches another device",
        "Features.ListTypeAttributes: 1.37 with DRAListTypeAttributes (1.36's scheduler "
        "never passes it)",
        "structured/internal/experimental: matchAttributeConstraint.add, attributeAsSet, "
        "constraint.go distinctAttributeConstraint.matchesAttribute",
    ),
    "distinct_every_device": (
        "distinctAttribute compares a device with every device already taken (until 1.36 "
        "with the last device of each request only)",
        "1.37",
        "structured/internal/*/constraint.go: distinctAttributeConstraint.attributes",
    ),
    "derived_attributes": (
        "a request's derivedAttributes are evaluated per device (CEL) and read by the "
        "claim's constraints in place of a published attribute of that name; an error "
        "fails the attempt",
        "Features.DerivedAttributes: 1.37 with DRADerivedAttributes (experimental)",
        "structured/internal/experimental/allocator_experimental.go: lookupAttribute, "
        "validateDeviceRequest; cel/compile.go: EvaluateDerivedAttribute",
    ),
    "derived_attributes_refused": (
        "a request with derivedAttributes is refused (1.34-1.36 do not know the field "
        "and read the request without them)",
        "1.37 without Features.DerivedAttributes",
        "structured/internal/{incubating,experimental}/allocator_*.go: validateDeviceRequest",
    ),
}


@lru_cache(maxsize=32)
def rules_for(profile: Profile) -> Rules:
    features = profile.features
    experimental = profile.implementation == "experimental"
    return Rules(
        taints="DeviceTaints" in features,
        taint_rules=profile.gate(
            "DRADeviceTaints" if profile.release == "1.34" else "DRADeviceTaintRules"
        ),
        partitionable="PartitionableDevices" in features,
        shareable="ConsumableCapacity" in features,
        invalid_pool_is_node_local=profile.release != "1.34",
        pools_sorted=profile.release not in ("1.34", "1.35"),
        search_resumes=profile.release not in ("1.34", "1.35"),
        distinct_by_value=profile.release != "1.34",
        list_type_attributes=profile.release == "1.37"
        or (profile.release == "1.36" and profile.gate("DRAListTypeAttributes")),
        counter_slices_everywhere=profile.release in ("1.35", "1.36"),
        node_slices_first=profile.release not in ("1.34", "1.35"),
        check_slices_in_pool=profile.release != "1.34",
        incomplete_pools_refused=profile.release != "1.34",
        counters_per_pool=profile.release != "1.34",
        shares_skip_counter_check=profile.release != "1.34",
        empty_shares_stay=profile.release == "1.35" and experimental,
        unpartitioned_skips_counter_slices=profile.release != "1.34",
        counter_slices_hold_no_devices=profile.release != "1.34",
        capacity_recheck_own_device=profile.release != "1.34"
        or not profile.gate("DRAConsumableCapacity"),
        all_mode_static_capacity=profile.release == "1.37",
        shares_debit_once=profile.release == "1.37",
        shares_debit_counters=profile.release not in ("1.34", "1.35"),
        refusals_release_counters=profile.release in ("1.36", "1.37"),
        counters_by_pool_id=profile.release in ("1.36", "1.37"),
        admin_access="AdminAccess" in features,
        prioritized_list="PrioritizedList" in features,
        capacity_requests_refused="ConsumableCapacity" not in features
        and profile.supports("ConsumableCapacity"),
        binding_conditions="DeviceBindingAndStatus" in features
        or {"DeviceBinding", "DeviceStatus"} <= features,
        binding_slices_last=experimental and profile.release in ("1.34", "1.35"),
        binding_pools_last=profile.release not in ("1.34", "1.35") or experimental,
        fractional_capacity_range="FractionalCapacityRange" in features,
        compatibility_groups="CompatibilityGroups" in features,
        compatibility_groups_skip_slices=profile.release == "1.37"
        and "CompatibilityGroups" not in features,
        node_operations_checked=profile.release == "1.37" and experimental,
        optional_node_operations="OptionalNodeOperations" in features,
        includes_function=profile.release not in ("1.34", "1.35"),
        list_constraints="ListTypeAttributes" in features,
        distinct_every_device=profile.release == "1.37",
        derived_attributes="DerivedAttributes" in features,
        derived_attributes_refused=profile.release == "1.37"
        and "DerivedAttributes" not in features,
    )


def refusal(claim: ResourceClaim, rules: Rules) -> str | None:
    """Why the profile's allocator refuses the claim before looking at any device: a
    request uses a field its gates leave off (Allocate returns an error, the attempt is
    aborted)."""
    for i, constraint in enumerate(claim.constraints):
        if not constraint.distinct_attribute and not constraint.match_attribute:
            # What an API server without DRAConsumableCapacity leaves of distinctAttribute.
            return f"constraint #{i} is empty (unsupported constraint type?)"
        if constraint.distinct_attribute and not constraint.match_attribute and not rules.shareable:
            # The API server drops distinctAttribute while DRAConsumableCapacity is off,
            # which leaves a constraint the allocator cannot read.
            return f"constraint #{i} is empty: distinctAttribute needs DRAConsumableCapacity"
    for request in claim.requests:
        if request.prioritized and not rules.prioritized_list:
            return f"request {request.name} has firstAvailable, but DRAPrioritizedList is off"
        for choice in request.choices:
            if choice.derived_attributes and rules.derived_attributes_refused:
                return (
                    f"request {request.name} has derived attributes, but "
                    "DRADerivedAttributes is off"
                )
            if choice.admin_access and not rules.admin_access:
                return f"request {request.name} asks for admin access, but DRAAdminAccess is off"
            if choice.capacity_requests and rules.capacity_requests_refused:
                return (
                    f"request {request.name} has capacity requests, but DRAConsumableCapacity "
                    "is off"
                )
    return None


def as_read(claim: ResourceClaim, rules: Rules) -> ResourceClaim:
    """The claim as an allocator without consumable capacity reads it: no capacity asked."""
    if rules.shareable or not any(c.capacity_requests for r in claim.requests for c in r.choices):
        return claim
    requests = tuple(
        r.model_copy(
            update={
                "choices": tuple(c.model_copy(update={"capacity_requests": {}}) for c in r.choices)
            }
        )
        for r in claim.requests
    )
    return claim.model_copy(update={"requests": requests})


def differences(profile: Profile) -> list[str]:
    """The rules where the profile's allocator departs from 1.36's with every gate on."""
    rules, full = rules_for(profile), REFERENCE
    return [f.name for f in fields(Rules) if getattr(rules, f.name) != getattr(full, f.name)]


# The rules of the default profile: what the engine judges with unless told otherwise.
DEFAULT_RULES: Final = rules_for(DEFAULT)


def project(fs: FlatSlice, rules: Rules) -> FlatSlice:
    """The slice as the profile's allocator reads it: without taints when they do not
    block, every device exclusive when sharing is off, without compatibility groups where
    the release does not know them. A profile with every rule on (the common case) gets
    the slice itself back, so no memory is spent."""
    drop_taints = not rules.taints and any(d.taints for d in fs.devices)
    drop_sharing = not rules.shareable and any(d.allow_multiple_allocations for d in fs.devices)
    groups = _uses_groups(fs)
    drop_groups = groups and not (
        rules.compatibility_groups or rules.compatibility_groups_skip_slices
    )
    ignored: str | None = None
    if not rules.partitionable and bool(
        (fs.counter_sets and rules.unpartitioned_skips_counter_slices)
        or fs.slice.per_device_node_selection
    ):
        ignored = "PartitionableDevicesDisabled"
    elif groups and rules.compatibility_groups_skip_slices:
        ignored = "CompatibilityGroupsDisabled"
    counters_only = bool(
        rules.partitionable
        and rules.counter_slices_hold_no_devices
        and fs.counter_sets
        and fs.devices
    )
    if not (drop_taints or drop_sharing or drop_groups or ignored or counters_only):
        return fs
    devices = fs.devices
    if drop_taints or drop_sharing or drop_groups:
        devices = tuple(
            replace(
                d,
                taints=() if drop_taints else d.taints,
                allow_multiple_allocations=d.allow_multiple_allocations and not drop_sharing,
                consumes_counters=_without_groups(d.consumes_counters)
                if drop_groups
                else d.consumes_counters,
            )
            for d in fs.devices
        )
    # Slices skipped for their compatibility groups are filtered out of the count too.
    uncounted = ignored == "CompatibilityGroupsDisabled"
    return FlatSlice(
        fs.slice, devices, fs.counter_sets, fs.errors, ignored, uncounted, counters_only
    )


def _uses_groups(fs: FlatSlice) -> bool:
    return any(c.compatibility_groups for d in fs.devices for c in d.consumes_counters)


def _without_groups(consumes: tuple[CounterConsumption, ...]) -> tuple[CounterConsumption, ...]:
    """Until 1.36 the API has no compatibilityGroups: the server and the allocator drop it."""
    if not any(c.compatibility_groups for c in consumes):
        return consumes
    return tuple(c.model_copy(update={"compatibility_groups": ()}) for c in consumes)
