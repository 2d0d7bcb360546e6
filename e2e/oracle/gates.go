package main

import (
	"fmt"
	"strconv"
	"strings"
)

// gateSet holds the feature gates of the profile the oracle answers for, as the
// kube-scheduler of that release would have them. The caller names every gate that
// matters; a gate it leaves out is off. nil (no -gates flag) means every gate on.
type gateSet map[string]bool

func (g gateSet) on(name string) bool {
	if g == nil {
		return true
	}
	return g[name]
}

// parseGates reads "Name=true,Other=false" the way --feature-gates does.
func parseGates(text string) (gateSet, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	gates := gateSet{}
	for _, item := range strings.Split(text, ",") {
		name, value, found := strings.Cut(strings.TrimSpace(item), "=")
		if !found || name == "" {
			return nil, fmt.Errorf("gate %q: want Name=true or Name=false", item)
		}
		enabled, err := strconv.ParseBool(value)
		if err != nil {
			return nil, fmt.Errorf("gate %s: %q is not a boolean", name, value)
		}
		gates[name] = enabled
	}
	return gates, nil
}
