package main

// The world of one case: Kubernetes objects decoded with the real API types, and the
// inputs the scheduler would hand to structured.NewAllocator for them.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
	kjson "sigs.k8s.io/json"
)

// probeClassName is a DeviceClass without selectors that the oracle adds to every world
// (unless the world has its own), so probes can ask for "any device" plus their own selectors.
const probeClassName = "draview-probe"

type world struct {
	slices  []*resourceapi.ResourceSlice // in the order of the case's objects
	claims  []*resourceapi.ResourceClaim
	classes map[string]*resourceapi.DeviceClass
	rules   []*taintRule
	nodes   map[string]*v1.Node
}

type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

// strictDecode decodes like the API machinery does (case-sensitive field names, integers
// kept as int64); unknown fields are ignored.
func strictDecode(data []byte, into any) error {
	return kjson.UnmarshalCaseSensitivePreserveInts(data, into)
}

func decodeWorld(objects []json.RawMessage) (*world, error) {
	w := &world{
		classes: map[string]*resourceapi.DeviceClass{},
		nodes:   map[string]*v1.Node{},
	}
	for i, raw := range objects {
		if err := w.add(raw, "", ""); err != nil {
			return nil, fmt.Errorf("objects[%d]: %w", i, err)
		}
	}
	if _, found := w.classes[probeClassName]; !found {
		class := &resourceapi.DeviceClass{}
		class.Name = probeClassName
		w.classes[probeClassName] = class
	}
	// Nodes named by slices or devices but missing from the world exist without labels.
	for _, slice := range w.slices {
		w.implicitNode(ptr.Deref(slice.Spec.NodeName, ""))
		for _, device := range slice.Spec.Devices {
			w.implicitNode(ptr.Deref(device.NodeName, ""))
		}
	}
	return w, nil
}

func (w *world) implicitNode(name string) {
	if name == "" {
		return
	}
	if _, found := w.nodes[name]; !found {
		node := &v1.Node{}
		node.Name = name
		w.nodes[name] = node
	}
}

// add decodes one object. Items of a List inherit apiVersion and kind when they lack them
// (typed lists such as ResourceSliceList from the API omit them per item).
func (w *world) add(raw json.RawMessage, defaultAPIVersion, defaultKind string) error {
	var meta typeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if meta.APIVersion == "" {
		meta.APIVersion = defaultAPIVersion
	}
	if meta.Kind == "" {
		meta.Kind = defaultKind
	}
	if strings.HasSuffix(meta.Kind, "List") {
		// "List" (kubectl): items carry their own apiVersion and kind.
		// "ResourceSliceList" and the like: items default to the list's.
		itemKind := strings.TrimSuffix(meta.Kind, "List")
		itemVersion := meta.APIVersion
		if itemKind == "" {
			itemVersion = ""
		}
		for i, item := range meta.Items {
			if err := w.add(item, itemVersion, itemKind); err != nil {
				return fmt.Errorf("items[%d]: %w", i, err)
			}
		}
		return nil
	}
	group, version := splitAPIVersion(meta.APIVersion)
	switch meta.Kind {
	case "ResourceSlice", "ResourceClaim", "DeviceClass":
		if group != "resource.k8s.io" || version != "v1" {
			return fmt.Errorf("%s: apiVersion %q is not supported, use resource.k8s.io/v1", meta.Kind, meta.APIVersion)
		}
	case "DeviceTaintRule":
		if group != "resource.k8s.io" || (version != "v1" && version != "v1beta2" && version != "v1alpha3") {
			return fmt.Errorf("DeviceTaintRule: apiVersion %q is not supported, use resource.k8s.io/v1, v1beta2 or v1alpha3", meta.APIVersion)
		}
	case "Node":
		if group != "" || version != "v1" {
			return fmt.Errorf("Node: apiVersion %q is not supported, use v1", meta.APIVersion)
		}
	default:
		// Pods, namespaces, draview's own objects ...: not part of what the allocator sees.
		return nil
	}
	switch meta.Kind {
	case "ResourceSlice":
		slice := &resourceapi.ResourceSlice{}
		if err := strictDecode(raw, slice); err != nil {
			return fmt.Errorf("ResourceSlice: %w", err)
		}
		w.slices = append(w.slices, slice)
	case "ResourceClaim":
		claim := &resourceapi.ResourceClaim{}
		if err := strictDecode(raw, claim); err != nil {
			return fmt.Errorf("ResourceClaim: %w", err)
		}
		w.claims = append(w.claims, claim)
	case "DeviceClass":
		class := &resourceapi.DeviceClass{}
		if err := strictDecode(raw, class); err != nil {
			return fmt.Errorf("DeviceClass: %w", err)
		}
		w.classes[class.Name] = class
	case "DeviceTaintRule":
		// v1alpha3, v1beta2 and v1 have the same JSON shape for what the tracker reads
		// (spec.deviceSelector {driver, pool, device}, spec.taint), and not every release
		// has Go types for each: one local type reads them all.
		rule := &taintRule{}
		if err := strictDecode(raw, rule); err != nil {
			return fmt.Errorf("DeviceTaintRule: %w", err)
		}
		w.rules = append(w.rules, rule)
	case "Node":
		node := &v1.Node{}
		if err := strictDecode(raw, node); err != nil {
			return fmt.Errorf("Node: %w", err)
		}
		w.nodes[node.Name] = node
	}
	return nil
}

func splitAPIVersion(apiVersion string) (string, string) {
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		return "", apiVersion
	}
	return group, version
}

func (w *world) nodeNames() []string {
	names := make([]string, 0, len(w.nodes))
	for name := range w.nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// allocatedState mirrors claimTracker.GatherAllocatedState and foreachAllocatedDevice of
// k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources (dra_manager.go,
// allocateddevices.go): adminAccess results never count; with DRAConsumableCapacity on,
// results with a shareID are shared devices and add their consumedCapacity (when set) to
// the device's aggregated capacity; every other result (every result, with the gate off:
// the legacy exclusive model) makes its device allocated.
func allocatedState(claims []*resourceapi.ResourceClaim, consumableCapacity bool) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(result.AdminAccess, false) {
				continue
			}
			deviceID := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if consumableCapacity && result.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(deviceID, result.ShareID))
				if result.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(deviceID, result.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(deviceID)
		}
	}
	return state
}

// classLister serves the world's DeviceClasses like the scheduler's informer-backed lister:
// a missing class is a NotFound error.
type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	classes := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, class := range l {
		classes = append(classes, class)
	}
	sort.Slice(classes, func(i, j int) bool { return classes[i].Name < classes[j].Name })
	return classes, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	class, found := l[name]
	if !found {
		return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
	}
	return class, nil
}

var _ structured.DeviceClassLister = classLister{}

// defaultClaim applies what the API server's defaulting does to a stored v1 ResourceClaim
// (SetObjectDefaults_ResourceClaim in k8s.io/kubernetes/pkg/apis/resource/v1): allocation
// mode ExactCount with count 1, toleration operator Equal. Probes are written by hand and
// never went through an API server; the allocator rejects an empty allocation mode.
func defaultClaim(claim *resourceapi.ResourceClaim) {
	for i := range claim.Spec.Devices.Requests {
		request := &claim.Spec.Devices.Requests[i]
		if request.Exactly != nil {
			if request.Exactly.AllocationMode == "" {
				request.Exactly.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if request.Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount && request.Exactly.Count == 0 {
				request.Exactly.Count = 1
			}
			defaultTolerations(request.Exactly.Tolerations)
		}
		for j := range request.FirstAvailable {
			sub := &request.FirstAvailable[j]
			if sub.AllocationMode == "" {
				sub.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if sub.AllocationMode == resourceapi.DeviceAllocationModeExactCount && sub.Count == 0 {
				sub.Count = 1
			}
			defaultTolerations(sub.Tolerations)
		}
	}
}

func defaultTolerations(tolerations []resourceapi.DeviceToleration) {
	for i := range tolerations {
		if tolerations[i].Operator == "" {
			tolerations[i].Operator = resourceapi.DeviceTolerationOpEqual
		}
	}
}
