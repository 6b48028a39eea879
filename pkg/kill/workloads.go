package kill

import (
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Workload is the controller of a guarded pod.
type Workload struct {
	Kind      string // ReplicaSet, StatefulSet or DaemonSet
	Namespace string
	Name      string
	UID       types.UID
}

// String is how events name the workload, e.g. "ReplicaSet ns/web".
func (w Workload) String() string { return fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name) }

// guardedKinds are the controllers whose pods are interchangeable replicas.
// Jobs are not: their pods run to completion and are not restarted into
// service.
var guardedKinds = map[string]bool{"ReplicaSet": true, "StatefulSet": true, "DaemonSet": true}

// WorkloadOf returns the pod's controller if it is an apps/v1 ReplicaSet,
// StatefulSet or DaemonSet.
func WorkloadOf(pod *v1.Pod) (Workload, bool) {
	if pod == nil {
		return Workload{}, false
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || !guardedKinds[ref.Kind] {
		return Workload{}, false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != "apps" {
		return Workload{}, false
	}
	return Workload{Kind: ref.Kind, Namespace: pod.Namespace, Name: ref.Name, UID: ref.UID}, true
}

// OwnedPods lists this node's pods whose controller has the given UID.
type OwnedPods func(controllerUID types.UID) []*v1.Pod

// controllerIndex is the pod informer index of controller UIDs.
const controllerIndex = "probed.io/controller-uid"

// IndexByController adds a controller-UID index to the pod informer (before
// it starts) and returns the OwnedPods that reads it.
func IndexByController(inf cache.SharedIndexInformer) (OwnedPods, error) {
	err := inf.AddIndexers(cache.Indexers{controllerIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*v1.Pod); ok {
			if ref := metav1.GetControllerOf(p); ref != nil {
				return []string{string(ref.UID)}, nil
			}
		}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("adding the pod controller index: %w", err)
	}
	indexer := inf.GetIndexer()
	return func(uid types.UID) []*v1.Pod {
		objs, err := indexer.ByIndex(controllerIndex, string(uid))
		if err != nil {
			return nil
		}
		out := make([]*v1.Pod, 0, len(objs))
		for _, o := range objs {
			if p, ok := o.(*v1.Pod); ok {
				out = append(out, p)
			}
		}
		return out
	}, nil
}

// Decision is the workload guard's answer to a liveness kill.
type Decision struct {
	// Workload is the pod's controller; zero when the pod has none guarded.
	Workload Workload
	// Guarded: the pod belongs to a guarded workload with at least two
	// active pods on this node.
	Guarded bool
	// Failing and Total count the workload's active pods on this node, and
	// those of them failing liveness (this pod included).
	Failing, Total int
	// Paused: more than half of them are failing; no kill.
	Paused bool
	// Expired: more than half are failing, but the workload has been
	// paused for the longest allowed; the kill goes ahead.
	Expired bool
}

// Message is the RestartsPaused event text.
func (d Decision) Message() string {
	return fmt.Sprintf("liveness failing on %d of %d pods of %s on this node; pausing restarts", d.Failing, d.Total, d.Workload)
}

// Workloads is the per-workload guard: it knows, per controller, how many of
// its pods on this node are failing liveness, and pauses liveness kills
// while more than half are.
//
// A pod counts as failing from the moment one of its containers reaches its
// liveness failure threshold (Failing) until a liveness probe of that
// container passes again (LivenessPassed) or the pod goes (ForgetPod). A
// container that was restarted keeps counting until its new instance passes
// a probe: it is down meanwhile. That is what stops a correlated failure
// from restarting every replica: the first half are restarted, the rest
// wait until those come back healthy.
//
// An active pod is one not terminal and not being deleted. Workloads with
// fewer than two active pods on this node, and pods of no ReplicaSet,
// StatefulSet or DaemonSet, are not guarded: pausing their only replica's
// restart would protect nothing.
//
// A pause is bounded: once a workload has been paused for maxPause (say its
// first restarted replica never recovers, so it never stops counting as
// failing), its kills go ahead as under the kubelet, until fewer than half
// of its pods fail and a later majority starts a new pause.
//
// It is safe for concurrent use.
type Workloads struct {
	owned    OwnedPods
	metrics  *Metrics
	maxPause time.Duration
	clock    clock.PassiveClock

	mu      sync.Mutex
	failing map[types.UID]*failingPod
	paused  map[types.UID]pause
}

// pause is one workload's ongoing pause.
type pause struct {
	workload Workload
	since    time.Time
	// expired: held for maxPause; its kills go ahead.
	expired bool
}

// DefaultMaxPause bounds a workload guard pause (--liveness-workload-guard-max-pause).
const DefaultMaxPause = 10 * time.Minute

type failingPod struct {
	workload   Workload
	containers map[string]bool
}

// NewWorkloads returns a guard reading pods through owned (see
// IndexByController) whose pauses last at most maxPause (DefaultMaxPause
// when <= 0). metrics may be nil; clk nil is the real clock.
func NewWorkloads(owned OwnedPods, metrics *Metrics, maxPause time.Duration, clk clock.PassiveClock) *Workloads {
	if maxPause <= 0 {
		maxPause = DefaultMaxPause
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Workloads{
		owned:    owned,
		metrics:  metrics,
		maxPause: maxPause,
		clock:    clk,
		failing:  map[types.UID]*failingPod{},
		paused:   map[types.UID]pause{},
	}
}

// Failing records that container of pod is at its liveness failure
// threshold and decides whether it may be killed.
func (w *Workloads) Failing(pod *v1.Pod, container string) Decision {
	wl, ok := WorkloadOf(pod)
	if !ok {
		return Decision{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.failing[pod.UID]
	if f == nil {
		f = &failingPod{workload: wl, containers: map[string]bool{}}
		w.failing[pod.UID] = f
	}
	f.containers[container] = true
	return w.decideLocked(wl, pod)
}

// LivenessPassed records that a liveness probe of the container passed, or
// that the container no longer has one.
func (w *Workloads) LivenessPassed(podUID types.UID, container string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.failing[podUID]
	if f == nil || !f.containers[container] {
		return
	}
	delete(f.containers, container)
	if len(f.containers) == 0 {
		delete(w.failing, podUID)
	}
	w.decideLocked(f.workload, nil)
}

// ForgetPod drops a pod that left the node or finished.
func (w *Workloads) ForgetPod(podUID types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.failing[podUID]
	if f == nil {
		return
	}
	delete(w.failing, podUID)
	w.decideLocked(f.workload, nil)
}

// Paused lists the workloads whose restarts are paused, sorted.
func (w *Workloads) Paused() []Workload {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Workload, 0, len(w.paused))
	for _, p := range w.paused {
		if !p.expired {
			out = append(out, p.workload)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// decideLocked counts the workload's active pods and failing ones, with
// self (the pod asking, if any) counted even if the cache lags, and updates
// the paused set.
func (w *Workloads) decideLocked(wl Workload, self *v1.Pod) Decision {
	d := Decision{Workload: wl}
	seenSelf := false
	for _, p := range w.owned(wl.UID) {
		if !active(p) {
			continue
		}
		d.Total++
		if self != nil && p.UID == self.UID {
			seenSelf = true
		}
		if w.failing[p.UID] != nil {
			d.Failing++
		}
	}
	if self != nil && !seenSelf {
		d.Total++
		d.Failing++
	}
	d.Guarded = d.Total >= 2
	majority := d.Guarded && d.Failing*2 > d.Total
	p, was := w.paused[wl.UID]
	switch {
	case majority && !was:
		w.paused[wl.UID] = pause{workload: wl, since: w.clock.Now()}
		klog.InfoS("Pausing liveness restarts: most of the workload's pods on this node are failing", "workload", wl.String(), "failing", d.Failing, "total", d.Total, "maxPause", w.maxPause)
		d.Paused = true
	case majority && !p.expired && w.clock.Since(p.since) >= w.maxPause:
		p.expired = true
		w.paused[wl.UID] = p
		klog.InfoS("Liveness restarts paused for the longest allowed; restarting as the kubelet would", "workload", wl.String(), "failing", d.Failing, "total", d.Total, "pausedFor", w.clock.Since(p.since).Round(time.Second))
		d.Expired = true
	case majority:
		d.Paused, d.Expired = !p.expired, p.expired
	case was:
		delete(w.paused, wl.UID)
		klog.InfoS("Resuming liveness restarts", "workload", wl.String(), "failing", d.Failing, "total", d.Total)
	}
	w.metrics.setPaused(w.activePausesLocked())
	return d
}

func (w *Workloads) activePausesLocked() int {
	n := 0
	for _, p := range w.paused {
		if !p.expired {
			n++
		}
	}
	return n
}

func active(p *v1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}
