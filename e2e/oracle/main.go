// Command draview-oracle asks the real DRA allocator (k8s.io/dynamic-resource-allocation/structured,
// the code the kube-scheduler runs) whether probe claims can be allocated on each node of a
// world given as Kubernetes objects. It reads one case per JSON line on stdin and writes one
// answer per line on stdout, in order; README.md describes the protocol.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// profileGates are the feature gates of the kube-scheduler the oracle stands in for
// (-gates); allocatorFeatures and celFeatures of the release this binary is built for
// (release_k8s1XX.go) turn them into what that scheduler hands the allocator, so
// structured.NewAllocator picks the implementation (stable, incubating, experimental)
// that scheduler would.
var (
	profileGates gateSet
	features     structured.Features
)

var (
	timeout      = flag.Duration("timeout", 10*time.Second, "time limit of one Allocate call")
	gatesFlag    = flag.String("gates", "", "feature gates of the scheduler, Name=true,...; a gate not named is off (default: every gate on)")
	printRelease = flag.Bool("release", false, "print the Kubernetes release this oracle is built for and exit")
	workers      = flag.Int("workers", runtime.GOMAXPROCS(0), "Allocate calls run in parallel")
	celCache     *cel.Cache
)

type caseIn struct {
	ID      json.RawMessage   `json:"id"`
	Objects []json.RawMessage `json:"objects"`
	Probes  []probeIn         `json:"probes"`
	Orders  *int              `json:"orders"`
	// Further orders: the list as given, rotated to start at each of these indices. The
	// caller names the slices it wants the allocator to meet first in their pool.
	Rotations []int `json:"rotations"`
	// Further orders given outright: each a permutation of the slices' indices, so a
	// caller can realise any combination of first slices across pools.
	Permutations [][]int `json:"permutations"`
	// The fit mode (fit.go): copies placed one after another instead of probes.
	Fit *fitIn `json:"fit"`
}

type probeIn struct {
	ID    string          `json:"id"`
	Claim json.RawMessage `json:"claim"`
	Nodes []string        `json:"nodes"` // nil: every node
}

type caseOut struct {
	ID     json.RawMessage `json:"id"`
	Probes []probeOut      `json:"probes"`
}

type errorOut struct {
	ID    json.RawMessage `json:"id"`
	Error string          `json:"error"`
}

type probeOut struct {
	ID    string              `json:"id"`
	Nodes map[string][]string `json:"nodes"` // node -> one outcome per order
	// Results holds, for every node whose order-0 outcome is "ok", the allocation:
	// one list per allocated claim (always exactly one), one entry per device.
	Results map[string][][]deviceResult `json:"results,omitempty"`
}

type deviceResult struct {
	Request          string                                          `json:"request"`
	Driver           string                                          `json:"driver"`
	Pool             string                                          `json:"pool"`
	Device           string                                          `json:"device"`
	ShareID          *string                                         `json:"shareID,omitempty"`
	ConsumedCapacity map[resourceapi.QualifiedName]resource.Quantity `json:"consumedCapacity,omitempty"`
	AdminAccess      bool                                            `json:"adminAccess,omitempty"`
}

func main() {
	flag.Parse()
	if *printRelease {
		fmt.Println(release)
		return
	}
	gates, err := parseGates(*gatesFlag)
	if err != nil {
		fmt.Fprintf(os.Stderr, "draview-oracle: -gates: %v\n", err)
		os.Exit(2)
	}
	profileGates = gates
	features = allocatorFeatures(gates)
	// The scheduler's cache (New in dynamicresources.go). Compilation results do not
	// depend on the world, so one cache serves every case.
	celCache = cel.NewCache(10, celFeatures(gates))
	if *workers < 1 {
		*workers = 1
	}
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "draview-oracle: %v\n", err)
		os.Exit(1)
	}
}

// serve answers every line of in on out, flushing after each answer so a client can
// pipeline. Blank lines are skipped.
func serve(in io.Reader, out io.Writer) error {
	reader := bufio.NewReaderSize(in, 1<<20)
	writer := bufio.NewWriterSize(out, 1<<16)
	encoder := json.NewEncoder(writer)
	encoder.SetEscapeHTML(false)
	for {
		line, readErr := reader.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if err := encoder.Encode(answer(line)); err != nil {
				return fmt.Errorf("write answer: %w", err)
			}
			if err := writer.Flush(); err != nil {
				return fmt.Errorf("write answer: %w", err)
			}
		}
		if errors.Is(readErr, io.EOF) {
			return nil
		}
		if readErr != nil {
			return fmt.Errorf("read case: %w", readErr)
		}
	}
}

// answer never fails: a malformed case gives {"id": ..., "error": ...}.
func answer(line []byte) any {
	var c caseIn
	if err := strictDecode(line, &c); err != nil {
		var idOnly struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(line, &idOnly)
		return errorOut{ID: idOnly.ID, Error: fmt.Sprintf("malformed case: %v", err)}
	}
	if c.Fit != nil {
		out, err := runFit(&c)
		if err != nil {
			return errorOut{ID: c.ID, Error: err.Error()}
		}
		return out
	}
	probes, err := runCase(&c)
	if err != nil {
		return errorOut{ID: c.ID, Error: err.Error()}
	}
	return caseOut{ID: c.ID, Probes: probes}
}

type probe struct {
	id    string
	claim *resourceapi.ResourceClaim
	nodes []*v1.Node
}

// task is one Allocate call; its answer lands in its own slots.
type task struct {
	probe, node, order int
}

func runCase(c *caseIn) ([]probeOut, error) {
	orders := 1
	if c.Orders != nil {
		orders = *c.Orders
	}
	if orders < 1 || orders > 1000 {
		return nil, fmt.Errorf("orders must be between 1 and 1000, not %d", orders)
	}
	w, err := decodeWorld(c.Objects)
	if err != nil {
		return nil, err
	}
	probes := make([]probe, len(c.Probes))
	for i, in := range c.Probes {
		p, err := decodeProbe(w, in)
		if err != nil {
			return nil, fmt.Errorf("probes[%d]: %w", i, err)
		}
		probes[i] = p
	}

	state := allocatedState(w.claims, profileGates.on("DRAConsumableCapacity"))
	classes := classLister(w.classes)
	patched := applyTaintRules(w.slices, w.rules)
	for _, r := range c.Rotations {
		if r < 0 || r >= len(patched) {
			return nil, fmt.Errorf("rotation %d outside the %d slices", r, len(patched))
		}
	}
	sliceOrders := make([][]*resourceapi.ResourceSlice, orders, orders+len(c.Rotations))
	for k := range sliceOrders {
		sliceOrders[k] = orderSlices(patched, k)
	}
	for _, r := range c.Rotations {
		sliceOrders = append(sliceOrders, slices.Concat(patched[r:], patched[:r]))
	}
	for k, perm := range c.Permutations {
		order, err := permute(patched, perm)
		if err != nil {
			return nil, fmt.Errorf("permutations[%d]: %w", k, err)
		}
		sliceOrders = append(sliceOrders, order)
	}
	orders = len(sliceOrders)

	outcomes := make([][][]string, len(probes)) // probe, node, order
	results := make([][][]resourceapi.AllocationResult, len(probes))
	var tasks []task
	for p := range probes {
		outcomes[p] = make([][]string, len(probes[p].nodes))
		results[p] = make([][]resourceapi.AllocationResult, len(probes[p].nodes))
		for n := range probes[p].nodes {
			outcomes[p][n] = make([]string, orders)
			for k := range orders {
				tasks = append(tasks, task{probe: p, node: n, order: k})
			}
		}
	}

	queue := make(chan task)
	var wg sync.WaitGroup
	for range min(*workers, max(len(tasks), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range queue {
				p := probes[t.probe]
				outcome, result := allocate(state, classes, sliceOrders[t.order], p.nodes[t.node], p.claim)
				outcomes[t.probe][t.node][t.order] = outcome
				if t.order == 0 && outcome == "ok" {
					results[t.probe][t.node] = result
				}
			}
		}()
	}
	for _, t := range tasks {
		queue <- t
	}
	close(queue)
	wg.Wait()

	out := make([]probeOut, len(probes))
	for p, pr := range probes {
		po := probeOut{ID: pr.id, Nodes: make(map[string][]string, len(pr.nodes))}
		for n, node := range pr.nodes {
			po.Nodes[node.Name] = outcomes[p][n]
			if result := results[p][n]; result != nil {
				if po.Results == nil {
					po.Results = map[string][][]deviceResult{}
				}
				po.Results[node.Name] = describeResults(result)
			}
		}
		out[p] = po
	}
	return out, nil
}

func decodeProbe(w *world, in probeIn) (probe, error) {
	if in.ID == "" {
		return probe{}, errors.New("probe without id")
	}
	if len(in.Claim) == 0 || string(in.Claim) == "null" {
		return probe{}, fmt.Errorf("probe %s: no claim", in.ID)
	}
	claim := &resourceapi.ResourceClaim{}
	if err := strictDecode(in.Claim, claim); err != nil {
		return probe{}, fmt.Errorf("probe %s: claim: %w", in.ID, err)
	}
	if claim.Name == "" {
		claim.Name = in.ID
	}
	if claim.Namespace == "" {
		claim.Namespace = "default"
	}
	defaultClaim(claim)
	names := in.Nodes
	if names == nil {
		names = w.nodeNames()
	}
	p := probe{id: in.ID, claim: claim, nodes: make([]*v1.Node, 0, len(names))}
	for _, name := range names {
		node, found := w.nodes[name]
		if !found {
			return probe{}, fmt.Errorf("probe %s: unknown node %q (neither a Node object nor named by a slice or device)", in.ID, name)
		}
		p.nodes = append(p.nodes, node)
	}
	return p, nil
}

// permute orders the slices as perm says; perm must name every index exactly once.
func permute(in []*resourceapi.ResourceSlice, perm []int) ([]*resourceapi.ResourceSlice, error) {
	if len(perm) != len(in) {
		return nil, fmt.Errorf("%d indices for %d slices", len(perm), len(in))
	}
	seen := make([]bool, len(in))
	out := make([]*resourceapi.ResourceSlice, 0, len(in))
	for _, i := range perm {
		if i < 0 || i >= len(in) || seen[i] {
			return nil, fmt.Errorf("index %d out of range or repeated", i)
		}
		seen[i] = true
		out = append(out, in[i])
	}
	return out, nil
}

// orderSlices gives slice list order k: 0 as given, 1 reversed, k >= 2 a shuffle seeded
// by k. The scheduler lists slices from an informer cache in no defined order, and some
// allocator outcomes depend on it (GatherPools takes resourceSliceCount from the first
// slice of a pool it meets).
func orderSlices(in []*resourceapi.ResourceSlice, k int) []*resourceapi.ResourceSlice {
	out := slices.Clone(in)
	switch k {
	case 0:
	case 1:
		slices.Reverse(out)
	default:
		rng := rand.New(rand.NewPCG(uint64(k), 0x6472617669657700)) // "draview\0"
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// allocate builds a fresh allocator for one node and asks it for the probe claim.
//
// The scheduler builds one allocator per pod in PreFilter and shares it across every node
// it filters; the allocator caches the available counters per pool name (not per driver)
// on first use, so one node's answer can leak into another's and drivers with equal pool
// names share counters (an upstream quirk). A fresh allocator per call keeps each answer
// a function of the world, the node and the slice order alone.
func allocate(state structured.AllocatedState, classes classLister, slices []*resourceapi.ResourceSlice,
	node *v1.Node, claim *resourceapi.ResourceClaim) (outcome string, result []resourceapi.AllocationResult) {
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
	result, err = allocator.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim.DeepCopy()})
	if err != nil {
		return classify(err), nil
	}
	// Filter in dynamicresources.go: anything but one result per claim is unschedulable.
	if len(result) != 1 {
		return "no", nil
	}
	return "ok", result
}

// classify maps an Allocate error the way Filter in dynamicresources.go does: a timeout,
// an error wrapping ErrFailedAllocationOnNode (this node only: "invalid"), or any other
// error (the scheduler aborts the whole attempt for the pod: "error").
func classify(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "error: timeout"
	case nodeLocal(err):
		return "invalid: " + err.Error()
	default:
		return "error: " + err.Error()
	}
}

func describeResults(results []resourceapi.AllocationResult) [][]deviceResult {
	out := make([][]deviceResult, len(results))
	for i, result := range results {
		devices := make([]deviceResult, 0, len(result.Devices.Results))
		for _, r := range result.Devices.Results {
			d := deviceResult{
				Request:          r.Request,
				Driver:           r.Driver,
				Pool:             r.Pool,
				Device:           r.Device,
				ConsumedCapacity: r.ConsumedCapacity,
				AdminAccess:      r.AdminAccess != nil && *r.AdminAccess,
			}
			if r.ShareID != nil {
				shareID := string(*r.ShareID)
				d.ShareID = &shareID
			}
			devices = append(devices, d)
		}
		out[i] = devices
	}
	return out
}
