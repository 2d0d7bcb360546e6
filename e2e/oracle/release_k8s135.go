//go:build k8s135

package main

// Kubernetes 1.35: what its kube-scheduler hands the allocator (AllocatorFeatures and the
// CEL cache in pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go of v1.35.x).

import (
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

const release = "1.35"

func allocatorFeatures(g gateSet) structured.Features {
	return structured.Features{
		AdminAccess:            g.on("DRAAdminAccess"),
		PrioritizedList:        g.on("DRAPrioritizedList"),
		PartitionableDevices:   g.on("DRAPartitionableDevices"),
		DeviceTaints:           g.on("DRADeviceTaints"),
		DeviceBindingAndStatus: g.on("DRADeviceBindingConditions") && g.on("DRAResourceClaimDeviceStatus"),
		ConsumableCapacity:     g.on("DRAConsumableCapacity"),
	}
}

func celFeatures(g gateSet) cel.Features {
	return cel.Features{EnableConsumableCapacity: g.on("DRAConsumableCapacity")}
}
