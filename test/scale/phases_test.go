//go:build scale

package scale

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/test/scale/apiload"
)

// fleet is every simulated node with the stand-in kubelet.
type fleet struct {
	t     *testing.T
	ctx   context.Context
	k     *kubelet
	nodes []*simNode
}

// podsWhere counts pods (of all nodes' pod lists, or of keys if given) for
// which ok holds, reading the stand-in kubelet's cache.
func (f *fleet) podsWhere(keys []string, ok func(*v1.Pod) bool) (int, int) {
	if keys == nil {
		keys = f.allKeys()
	}
	n := 0
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		if p, err := f.k.lister.Pods(ns).Get(name); err == nil && ok(p) {
			n++
		}
	}
	return n, len(keys)
}

func (f *fleet) allKeys() []string {
	var keys []string
	for _, n := range f.nodes {
		for _, p := range n.Pods {
			keys = append(keys, n.key(p))
		}
	}
	return keys
}

// waitPods polls until ok holds for every pod of keys (nil: all).
func (f *fleet) waitPods(what string, keys []string, timeout time.Duration, ok func(*v1.Pod) bool) time.Duration {
	f.t.Helper()
	start := time.Now()
	var got, total int
	lastLog := start
	for time.Since(start) < timeout {
		if got, total = f.podsWhere(keys, ok); got == total {
			return time.Since(start)
		}
		// A slow wait shows its progress (a cold run of make test once waited
		// here 9 minutes with nothing in the log).
		if time.Since(lastLog) >= 30*time.Second {
			lastLog = time.Now()
			f.t.Logf("%v: waiting for %s: %d of %d pods", time.Since(start).Round(time.Second), what, got, total)
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.t.Fatalf("timed out after %v waiting for %s: %d of %d pods", timeout, what, got, total)
	return 0
}

func readyIs(s v1.ConditionStatus) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool { return condStatus(p, gate) == s && condStatus(p, string(v1.PodReady)) == s }
}

// scrape reads the apiserver's apiload.Counters, failing the test if it cannot.
func (f *fleet) scrape() apiload.Counters {
	f.t.Helper()
	var c apiload.Counters
	var err error
	for range 20 { // across an apiserver restart the first scrapes may fail
		if c, err = apiload.Scrape(f.ctx, client); err == nil {
			return c
		}
		time.Sleep(500 * time.Millisecond)
	}
	f.t.Fatal(err)
	return nil
}

// settle waits until neither probed nor the stand-in kubelet has written pod
// status for quiet, then returns the apiload.Counters at that point.
func (f *fleet) settle(quiet, timeout time.Duration) apiload.Counters {
	f.t.Helper()
	start := time.Now()
	last := f.scrape()
	lastChange := time.Now()
	for time.Since(start) < timeout {
		time.Sleep(time.Second)
		c := f.scrape()
		if c.FS("probed", "status-write") != last.FS("probed", "status-write") ||
			c.FS("kubelet", "status-write") != last.FS("kubelet", "status-write") {
			lastChange = time.Now()
		}
		last = c
		if time.Since(lastChange) >= quiet {
			return c
		}
	}
	f.t.Fatalf("pod status writes did not stop for %v within %v", quiet, timeout)
	return nil
}

// window measures the apiserver and the control plane's CPU over fn.
type window struct {
	Seconds  float64            `json:"seconds"`
	Requests map[string]float64 `json:"requests"`
	CPUCores map[string]float64 `json:"cpuCores"`
	RSSMiB   map[string]float64 `json:"rssMiBAtEnd"`
	// Flips counts condition status changes the stand-in kubelet saw.
	Flips int64 `json:"flips"`
	delta apiload.Counters
}

func (f *fleet) measure(fn func()) window {
	base, u0 := f.scrape(), apiload.ReadUsage(cp.RunDir)
	fn()
	end, u1 := f.scrape(), apiload.ReadUsage(cp.RunDir)
	d := end.Sub(base)
	return window{Seconds: u1.At.Sub(u0.At).Seconds(), Requests: d.NonZero(), CPUCores: apiload.CPUCores(u0, u1), RSSMiB: u1.RSSMiB, delta: d}
}

// latencies summarises durations in seconds.
type latencies struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func summarize(ds []time.Duration) latencies {
	if len(ds) == 0 {
		return latencies{}
	}
	slices.Sort(ds)
	q := func(p float64) float64 {
		return ds[min(len(ds)-1, int(math.Ceil(p*float64(len(ds))))-1)].Seconds()
	}
	return latencies{N: len(ds), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: ds[len(ds)-1].Seconds()}
}

// flipLatencies is, per pod, the time from changing its readiness target at
// from to the stand-in kubelet seeing the gate condition at s.
func (f *fleet) flipLatencies(keys []string, from time.Time, s v1.ConditionStatus) latencies {
	var ds []time.Duration
	for _, key := range keys {
		if at, ok := f.k.seenAt(key, gate, s); ok && at.After(from) {
			ds = append(ds, at.Sub(from))
		}
	}
	return summarize(ds)
}

// setFailing marks the probe path kind ("ready" or "live") of the pods
// failing or healthy, on their nodes' sites.
func (f *fleet) setFailing(kind string, v bool, keys []string) {
	byNode := map[string]*simNode{}
	for _, n := range f.nodes {
		byNode[n.NS] = n
	}
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		byNode[ns].Site.setFailing(v, "/"+kind+"/"+name)
	}
}

// pick returns the keys of pods [from, to) of every node (or of nodes[:maxNodes]).
func (f *fleet) pick(from, to, maxNodes int) []string {
	var keys []string
	for i, n := range f.nodes {
		if maxNodes > 0 && i >= maxNodes {
			break
		}
		for j := from; j < min(to, len(n.Pods)); j++ {
			keys = append(keys, n.key(n.Pods[j]))
		}
	}
	return keys
}

// probedRSS is the mean RSS of the running probed processes, MiB.
func (f *fleet) probedRSS() float64 {
	var sum float64
	var n int
	for _, node := range f.nodes {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", node.Probed.PID()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				sum += kb / 1024
				n++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// parallelNodes runs fn for every node with a few at a time.
func (f *fleet) parallelNodes(workers int, fn func(*simNode) error) error {
	ch := make(chan *simNode)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range ch {
				if err := fn(n); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range f.nodes {
		ch <- n
	}
	close(ch)
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
