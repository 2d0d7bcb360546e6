//go:build !k8s134

package main

// What every release from 1.35 on does alike around the allocator.

import (
	"errors"

	"k8s.io/dynamic-resource-allocation/structured"
)

// taintRulesApplied: since 1.35 the slice tracker applies DeviceTaintRules with DRADeviceTaintRules.
func taintRulesApplied(g gateSet) bool { return g.on("DRADeviceTaintRules") }

// nodeLocal: Filter treats errors wrapping ErrFailedAllocationOnNode as this node's only.
func nodeLocal(err error) bool { return errors.Is(err, structured.ErrFailedAllocationOnNode) }
