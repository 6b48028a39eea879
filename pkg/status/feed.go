package status

import (
	"context"
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/containerstatus"
	"github.com/probed-dev/probed/pkg/results"
)

// Sink receives each pod's desired probe status. Writer is one.
type Sink interface {
	Set(key PodKey, desired PodState)
	Forget(uid types.UID)
}

// ProbeState is what the manager knows of one readiness or startup probe.
type ProbeState struct {
	// Live: a worker runs it. Ended: its worker ended on its own.
	Live, Ended bool
	// Invalid: declared but refused, with the problems found.
	Invalid        bool
	InvalidMessage string
}

// ContainerProbes are the probes of one container that has any.
type ContainerProbes struct {
	Name               string
	Readiness, Startup ProbeState
}

// ProbeSet is one pod's probes as the manager last pushed them.
type ProbeSet struct {
	Key PodKey
	// Containers in pod spec order.
	Containers []ContainerProbes
	// Seeds are the results established before a restart of probed, by
	// container; the feed does not modify them.
	Seeds map[string]Seed
}

// FeedOptions configures a Feed. All but OnStartupSuccess are required.
type FeedOptions struct {
	Pods               PodGetter
	Readiness, Startup results.Manager
	Sink               Sink
	// OnStartupSuccess hears each startup success before its pod's status
	// is derived (the manager triggers the readiness probe at once).
	OnStartupSuccess func(results.Update)
}

// Feed turns readiness and startup results into each pod's desired status:
// it watches the results caches itself, reads the pod from the informer
// cache and derives from the probe set the manager pushed last. It
// promises that of two concurrent updates of a pod (a result change, a
// worker exit, a sync) the later computation is always the one Sink keeps,
// and that a slow Sink never blocks a worker (the caches coalesce).
type Feed struct {
	o FeedOptions

	// deriveMu serializes Update: computing and handing over happen under
	// it. It is taken before mu, never after.
	deriveMu sync.Mutex

	mu   sync.Mutex
	sets map[types.UID]*ProbeSet
}

// NewFeed returns a Feed; call Run to start it.
func NewFeed(o FeedOptions) *Feed {
	return &Feed{o: o, sets: map[types.UID]*ProbeSet{}}
}

// SetProbes replaces a pod's probe set. It does not derive: the caller
// calls Update once its own state is consistent.
func (f *Feed) SetProbes(set ProbeSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets[set.Key.UID] = &set
}

// Forget drops a pod that is no longer probed, and its desired status.
func (f *Feed) Forget(uid types.UID) {
	f.mu.Lock()
	delete(f.sets, uid)
	f.mu.Unlock()
	f.o.Sink.Forget(uid)
}

// Run derives the pods whose readiness or startup results changed until
// ctx is done.
func (f *Feed) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.o.Readiness.Updates():
			f.updatePods(f.o.Readiness.Drain())
		case <-f.o.Startup.Updates():
			updates := f.o.Startup.Drain()
			if f.o.OnStartupSuccess != nil {
				for _, u := range updates {
					if u.Result == results.Success {
						f.o.OnStartupSuccess(u)
					}
				}
			}
			f.updatePods(updates)
		}
	}
}

func (f *Feed) updatePods(updates []results.Update) {
	seen := map[types.UID]bool{}
	for _, u := range updates {
		if !seen[u.PodUID] {
			seen[u.PodUID] = true
			f.Update(u.PodUID)
		}
	}
}

// Update derives a pod's desired probe status and hands it to Sink. A
// probe with no result yet for the current container instance counts as
// pending (not ready), unless probed had established its result before a
// restart of probed: then that seed stands until the worker's own probes
// say otherwise, so a restart of probed never flips a condition.
func (f *Feed) Update(uid types.UID) {
	f.deriveMu.Lock()
	defer f.deriveMu.Unlock()
	pod, ok := f.o.Pods.Pod(uid)
	if !ok {
		return
	}
	f.mu.Lock()
	set := f.sets[uid]
	f.mu.Unlock()
	if set == nil {
		return
	}
	inputs := make([]ContainerInput, 0, len(set.Containers))
	for _, c := range set.Containers {
		cs := containerstatus.Find(pod, c.Name)
		in := ContainerInput{Name: c.Name, Status: cs}
		seed := set.Seeds[c.Name]
		in.Readiness = probeInput(c.Readiness, f.o.Readiness, seed.ContainerID, seed.Ready, cs, false)
		in.Startup = probeInput(c.Startup, f.o.Startup, seed.ContainerID, seed.Started, cs, true)
		inputs = append(inputs, in)
	}
	st := Derive(inputs)
	st.Generation = pod.Generation
	f.o.Sink.Set(set.Key, st)
}

func probeInput(p ProbeState, rm results.Manager, seedID string, seeded *bool, cs *v1.ContainerStatus, startup bool) *ProbeInput {
	if p.Invalid {
		return &ProbeInput{Invalid: true, InvalidMessage: p.InvalidMessage}
	}
	if !p.Live && !p.Ended {
		return nil
	}
	in := &ProbeInput{}
	if cs != nil && cs.ContainerID != "" {
		var v results.Value
		v, in.Known = rm.Get(cs.ContainerID)
		in.Result, in.Output, in.Probed = v.Result, v.Output, v.Probed
		if !in.Known && Seeded(seedID, seeded) {
			in.Result, in.Known = SeedResult(seedID, cs.ContainerID)
			in.Probed = in.Known
		}
	}
	if !p.Live && startup && !in.Known {
		// The startup worker ended with Success on the pod's deletion and
		// took its result along; as in the kubelet, a container without a
		// startup worker counts as started.
		in.Known, in.Result = true, results.Success
	}
	return in
}

// Seeded reports whether a seed for the instance seedID, whose value for
// the probe type is v, establishes anything: only a Success does.
func Seeded(seedID string, v *bool) bool {
	return v != nil && *v && seedID != ""
}

// SeedResult is what an established seed (Seeded) says of the container
// instance containerID: Success for its own instance, nothing for another.
func SeedResult(seedID, containerID string) (results.Result, bool) {
	if containerID != seedID {
		return results.Unknown, false
	}
	return results.Success, true
}

// CloneSeeds copies seeds for a ProbeSet, so the pusher may go on
// changing its own map.
func CloneSeeds(seeds map[string]Seed) map[string]Seed { return maps.Clone(seeds) }
