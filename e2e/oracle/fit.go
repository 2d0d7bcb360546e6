package main

// The fit mode: copies of a workload (the claims of one Pod) allocated one after
// another by the real allocator, each on top of the allocations of the copies before,
// as the scheduler places Pods arriving one at a time. Every attempt asks every node
// (a fresh allocator per node, the slices in the order of the case), as Filter does;
// an error on any node aborts the attempt, and no later copy is placed. Which node
// that fits gets the copy is the scheduler's scores, which DRA does not decide: the
// case names placement policies, and each is played out.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
)

type fitIn struct {
	// The claims of one copy (a Pod's claims, or one claim), as probes are given.
	Claims []json.RawMessage `json:"claims"`
	// Copies to place at most (1 to 1000).
	Count int `json:"count"`
	// Placement policies: "first" and "last" (the first or last node by name that
	// fits), "spread" (the node with the fewest copies so far, then by name),
	// "random-<seed>" (a seeded random node among those that fit).
	Policies []string `json:"policies"`
}

type fitRun struct {
	Copies  int    `json:"copies"`
	Stopped string `json:"stopped"` // "count", "no", or "error: <msg>" (an attempt aborted)
	// Per copy, the node it went to (policies only).
	Nodes []string `json:"nodes,omitempty"`
	// The devices of the first copy, one list per claim.
	First [][]deviceResult `json:"first,omitempty"`
}

type fitOut struct {
	ID       json.RawMessage   `json:"id"`
	Nodes    map[string]fitRun `json:"nodes"`    // each node alone
	Policies map[string]fitRun `json:"policies"` // across the cluster
}

func runFit(c *caseIn) (any, error) {
	in := c.Fit
	if in.Count < 1 || in.Count > 1000 {
		return nil, fmt.Errorf("fit.count must be between 1 and 1000, not %d", in.Count)
	}
	if len(in.Claims) == 0 {
		return nil, errors.New("fit.claims is empty")
	}
	w, err := decodeWorld(c.Objects)
	if err != nil {
		return nil, err
	}
	claims := make([]*resourceapi.ResourceClaim, len(in.Claims))
	for i, raw := range in.Claims {
		claim := &resourceapi.ResourceClaim{}
		if err := strictDecode(raw, claim); err != nil {
			return nil, fmt.Errorf("fit.claims[%d]: %w", i, err)
		}
		if claim.Name == "" {
			claim.Name = fmt.Sprintf("fit-%d", i)
		}
		if claim.Namespace == "" {
			claim.Namespace = "default"
		}
		defaultClaim(claim)
		claims[i] = claim
	}
	f := &fitter{
		world:   w,
		claims:  claims,
		classes: classLister(w.classes),
		slices:  applyTaintRules(w.slices, w.rules),
		count:   in.Count,
	}
	for _, name := range w.nodeNames() {
		f.nodes = append(f.nodes, w.nodes[name])
	}
	out := fitOut{ID: c.ID, Nodes: map[string]fitRun{}, Policies: map[string]fitRun{}}
	for _, node := range f.nodes {
		out.Nodes[node.Name] = f.play([]*v1.Node{node}, "first")
	}
	for _, policy := range in.Policies {
		if policy != "first" && policy != "last" && policy != "spread" && !strings.HasPrefix(policy, "random-") {
			return nil, fmt.Errorf("fit.policies: unknown policy %q", policy)
		}
		out.Policies[policy] = f.play(f.nodes, policy)
	}
	return out, nil
}

type fitter struct {
	world   *world
	claims  []*resourceapi.ResourceClaim
	classes classLister
	slices  []*resourceapi.ResourceSlice
	nodes   []*v1.Node
	count   int
}

// play places copies on `nodes` under `policy` until count copies are placed, no node
// fits, or an attempt aborts.
func (f *fitter) play(nodes []*v1.Node, policy string) fitRun {
	var rng *rand.Rand
	if seed, found := strings.CutPrefix(policy, "random-"); found {
		n, _ := strconv.ParseUint(seed, 10, 64)
		rng = rand.New(rand.NewPCG(n, 0x666974)) // "fit"
	}
	placed := []*resourceapi.ResourceClaim{}
	perNode := map[string]int{}
	run := fitRun{Stopped: "count"}
	for run.Copies < f.count {
		state := allocatedState(append(append([]*resourceapi.ResourceClaim{}, f.world.claims...), placed...),
			profileGates.on("DRAConsumableCapacity"))
		var fits []int
		results := make([][]resourceapi.AllocationResult, len(nodes))
		aborted := ""
		for i, node := range nodes {
			outcome, result := allocateAll(state, f.classes, f.slices, node, f.copyOf(run.Copies))
			switch {
			case outcome == "ok":
				fits = append(fits, i)
				results[i] = result
			case strings.HasPrefix(outcome, "error"):
				if aborted == "" {
					aborted = outcome
				}
			}
		}
		if aborted != "" {
			run.Stopped = aborted
			return run
		}
		if len(fits) == 0 {
			run.Stopped = "no"
			return run
		}
		pick := fits[0]
		switch {
		case policy == "last":
			pick = fits[len(fits)-1]
		case policy == "spread":
			for _, i := range fits {
				if perNode[nodes[i].Name] < perNode[nodes[pick].Name] {
					pick = i
				}
			}
		case rng != nil:
			pick = fits[rng.IntN(len(fits))]
		}
		if run.Copies == 0 {
			run.First = describeResults(results[pick])
		}
		for k, claim := range f.copyOf(run.Copies) {
			claim.Status.Allocation = &results[pick][k]
			placed = append(placed, claim)
		}
		perNode[nodes[pick].Name]++
		if len(nodes) > 1 {
			run.Nodes = append(run.Nodes, nodes[pick].Name)
		}
		run.Copies++
	}
	return run
}

// copyOf gives the claims of copy k: the workload's claims, named and identified anew.
func (f *fitter) copyOf(k int) []*resourceapi.ResourceClaim {
	out := make([]*resourceapi.ResourceClaim, len(f.claims))
	for i, c := range f.claims {
		claim := c.DeepCopy()
		claim.Name = fmt.Sprintf("%s-copy-%d", c.Name, k)
		claim.UID = types.UID("fit-" + claim.Name)
		out[i] = claim
	}
	return out
}

// allocateAll is allocate for the claims of one Pod: one Allocate call, one result per
// claim or the node does not fit.
func allocateAll(state structured.AllocatedState, classes classLister, slices []*resourceapi.ResourceSlice,
	node *v1.Node, claims []*resourceapi.ResourceClaim) (outcome string, result []resourceapi.AllocationResult) {
	defer func() {
		if r := recover(); r != nil {
			outcome, result = fmt.Sprintf("error: panic: %v", r), nil
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	allocator, err := structured.NewAllocator(ctx, features, state, classes, slices, celCache)
	if err != nil {
		return classify(err), nil
	}
	result, err = allocator.Allocate(ctx, node, claims)
	if err != nil {
		return classify(err), nil
	}
	if len(result) != len(claims) {
		return "no", nil
	}
	return "ok", result
}
