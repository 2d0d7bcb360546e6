package main

import (
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// taintRule is what the slice tracker reads of a DeviceTaintRule of any served version.
// A 1.34 v1alpha3 rule may also select by device class or CEL; the worlds draview checks
// never do, and such fields are ignored here.
type taintRule struct {
	Spec struct {
		DeviceSelector *struct {
			Driver *string `json:"driver"`
			Pool   *string `json:"pool"`
			Device *string `json:"device"`
		} `json:"deviceSelector"`
		Taint struct {
			Key       string       `json:"key"`
			Value     string       `json:"value"`
			Effect    string       `json:"effect"`
			TimeAdded *metav1.Time `json:"timeAdded"`
		} `json:"taint"`
	} `json:"spec"`
}

// applyTaintRules returns the slices with the taints of matching DeviceTaintRules appended
// to their devices, as the scheduler sees them through
// ResourceSlices().ListWithDeviceTaintRules(). It mirrors Tracker.applyPatches in
// k8s.io/dynamic-resource-allocation/resourceslice/tracker (v0.36.3): a rule matches by
// driver, pool and device name, each optional; a nil selector matches every device; a
// slice is deep-copied before it is changed and the input is never modified.
//
// FACTS.md records that the v1.36.2 scheduler measured did not apply rules at all (a type
// mismatch in its slice tracker). The oracle models the intended, documented behaviour:
// a rule's NoSchedule/NoExecute taint blocks allocation exactly like a taint the driver
// published on the device.
func applyTaintRules(slices []*resourceapi.ResourceSlice, rules []*taintRule) []*resourceapi.ResourceSlice {
	if len(rules) == 0 || !taintRulesApplied(profileGates) {
		return slices
	}
	patched := make([]*resourceapi.ResourceSlice, len(slices))
	for i, slice := range slices {
		patched[i] = applyTaintRulesToSlice(slice, rules)
	}
	return patched
}

func applyTaintRulesToSlice(slice *resourceapi.ResourceSlice, rules []*taintRule) *resourceapi.ResourceSlice {
	patchedSlice := slice
	for _, rule := range rules {
		selector := rule.Spec.DeviceSelector
		var deviceName *string
		if selector != nil {
			if selector.Driver != nil && *selector.Driver != slice.Spec.Driver {
				continue
			}
			if selector.Pool != nil && *selector.Pool != slice.Spec.Pool.Name {
				continue
			}
			deviceName = selector.Device
		}
		for index, device := range slice.Spec.Devices {
			if deviceName != nil && *deviceName != device.Name {
				continue
			}
			taint := resourceapi.DeviceTaint{
				Key:       rule.Spec.Taint.Key,
				Value:     rule.Spec.Taint.Value,
				Effect:    resourceapi.DeviceTaintEffect(rule.Spec.Taint.Effect),
				TimeAdded: rule.Spec.Taint.TimeAdded,
			}
			if patchedSlice == slice {
				patchedSlice = slice.DeepCopy()
			}
			patchedSlice.Spec.Devices[index].Taints = append(patchedSlice.Spec.Devices[index].Taints, taint)
		}
	}
	return patchedSlice
}
