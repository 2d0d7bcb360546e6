//go:build k8s136

package main

// Kubernetes 1.36: what its kube-scheduler hands the allocator (AllocatorFeatures and the
// CEL cache in pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go of v1.36.x).

import (
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

const release = "1.36"

func allocatorFeatures(g gateSet) structured.Features {
	return structured.Features{
		AdminAccess:            g.on("DRAAdminAccess"),
		PrioritizedList:        g.on("DRAPrioritizedList"),
		PartitionableDevices:   g.on("DRAPartitionableDevices"),
		DeviceTaints:           g.on("DRADeviceTaints"),
		DeviceBindingAndStatus: g.on("DRADeviceBindingConditions") && g.on("DRAResourceClaimDeviceStatus"),
		ConsumableCapacity:     g.on("DRAConsumableCapacity"),
		// ListTypeAttributes is not set by 1.36's AllocatorFeatures: the gate reaches the CEL cache only.
	}
}

func celFeatures(g gateSet) cel.Features {
	return cel.Features{
		EnableConsumableCapacity: g.on("DRAConsumableCapacity"),
		EnableListTypeAttributes: g.on("DRAListTypeAttributes"),
	}
}
