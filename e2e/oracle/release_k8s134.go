//go:build k8s134

package main

// Kubernetes 1.34: what its kube-scheduler hands the allocator (PreFilter in
// pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go of v1.34.x).

import (
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

const release = "1.34"

func allocatorFeatures(g gateSet) structured.Features {
	return structured.Features{
		AdminAccess:          g.on("DRAAdminAccess"),
		PrioritizedList:      g.on("DRAPrioritizedList"),
		PartitionableDevices: g.on("DRAPartitionableDevices"),
		DeviceTaints:         g.on("DRADeviceTaints"),
		DeviceBinding:        g.on("DRADeviceBindingConditions"),
		DeviceStatus:         g.on("DRAResourceClaimDeviceStatus"),
		ConsumableCapacity:   g.on("DRAConsumableCapacity"),
	}
}

func celFeatures(g gateSet) cel.Features {
	return cel.Features{EnableConsumableCapacity: g.on("DRAConsumableCapacity")}
}

// taintRulesApplied: the 1.34 slice tracker applies DeviceTaintRules with DRADeviceTaints.
func taintRulesApplied(g gateSet) bool { return g.on("DRADeviceTaints") }

// nodeLocal: 1.34's Filter has no node-local allocation error; every error aborts the
// scheduling attempt for the pod.
func nodeLocal(error) bool { return false }
