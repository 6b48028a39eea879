package manager

import (
	"context"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/worker"
)

// deferringKiller defers every kill.
type deferringKiller struct {
	mu      sync.Mutex
	calls   int
	reprobe bool
}

func (k *deferringKiller) Kill(context.Context, *v1.Pod, *v1.Container, string, probespec.ProbeType, *v1.Probe) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	return &kill.DeferredError{Reason: kill.DeferWorkloadGuard, Message: "paused", Reprobe: k.reprobe}
}

func (k *deferringKiller) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls
}

// tracker is a fake LivenessTracker.
type tracker struct {
	mu     sync.Mutex
	passed map[string]int
	forgot map[types.UID]bool
}

func (t *tracker) LivenessPassed(uid types.UID, c string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.passed[string(uid)+"/"+c]++
}

func (t *tracker) ForgetPod(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgot[uid] = true
}

func (t *tracker) get(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.passed[key]
}

var failingLiveness = map[string]any{"tcpSocket": map[string]any{"port": 1}, "periodSeconds": 1, "failureThreshold": 1}

func (e *env) worker(uid types.UID, k probeKey) *worker.Worker {
	e.mgr.mu.Lock()
	defer e.mgr.mu.Unlock()
	if ent := e.mgr.pods[uid]; ent != nil {
		return ent.workers[k]
	}
	return nil
}

// TestPausedKillReprobes: a kill the restart guard cancels for good starts
// the probing over in the same worker, so the container is probed afresh
// and the kill asked for again only if it still fails.
func TestPausedKillReprobes(t *testing.T) {
	k := &deferringKiller{reprobe: true}
	e := newEnvWith(t, func(o *Options) { o.Killer = k })
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"livenessProbe": failingLiveness}}), "app")
	e.prober.result["containerd://u1-app"] = results.Failure
	e.create(pod)
	key := probeKey{"app", probespec.Liveness}
	e.eventually("a kill asked for", func() bool { return k.count() >= 1 })
	first := e.worker("u1", key)
	// The worker probes again, fails again, and asks again.
	e.eventually("asked again", func() bool { return k.count() >= 2 })
	e.prober.mu.Lock()
	probes := e.prober.calls["containerd://u1-app/Liveness"]
	e.prober.mu.Unlock()
	if probes < 2 {
		t.Errorf("probed %d times; want the container probed afresh before each kill", probes)
	}
	if w := e.worker("u1", key); w != first {
		t.Error("worker replaced; the same worker probes again")
	}
	if e.mgr.WorkerCount() != 1 {
		t.Errorf("%d workers; want 1", e.mgr.WorkerCount())
	}
}

// TestDeferredKillRetriesOnHold: a kill deferred for later (the budget)
// keeps its worker on hold, retrying on each period.
func TestDeferredKillRetriesOnHold(t *testing.T) {
	k := &deferringKiller{reprobe: false}
	e := newEnvWith(t, func(o *Options) { o.Killer = k })
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"livenessProbe": failingLiveness}}), "app")
	e.prober.result["containerd://u1-app"] = results.Failure
	e.create(pod)
	key := probeKey{"app", probespec.Liveness}
	e.eventually("a kill asked for", func() bool { return k.count() >= 1 })
	first := e.worker("u1", key)
	e.eventually("retried", func() bool { return k.count() >= 2 })
	if w := e.worker("u1", key); w != first {
		t.Error("worker replaced for a delayed kill")
	}
	if s := first.Snapshot(); s.State != worker.StateOnHold {
		t.Errorf("state %q; want on hold", s.State)
	}
	e.prober.mu.Lock()
	probes := e.prober.calls["containerd://u1-app/Liveness"]
	e.prober.mu.Unlock()
	if probes != 1 {
		t.Errorf("probed %d times while on hold; want 1", probes)
	}
}

// TestLivenessTracker: the tracker hears liveness successes, probes removed
// and pods gone.
func TestLivenessTracker(t *testing.T) {
	tr := &tracker{passed: map[string]int{}, forgot: map[types.UID]bool{}}
	e := newEnvWith(t, func(o *Options) { o.Liveness = tr })
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{
		"app": {"livenessProbe": tcp1, "readinessProbe": tcp1},
	}), "app", "other")
	e.create(pod)
	e.eventually("liveness success heard", func() bool { return tr.get("u1/app") >= 1 })
	// Readiness successes are not liveness.
	tr.mu.Lock()
	for k := range tr.passed {
		if k != "u1/app" {
			t.Errorf("unexpected LivenessPassed(%s)", k)
		}
	}
	tr.mu.Unlock()
	// Failures are not heard as passes.
	e.prober.mu.Lock()
	e.prober.result["containerd://u1-app"] = results.Failure
	e.prober.mu.Unlock()
	e.eventually("a failed probe", func() bool {
		for _, s := range e.mgr.Snapshots() {
			if s.ProbeType == "Liveness" && len(s.History) > 0 && s.History[len(s.History)-1].Result == "failure" {
				return true
			}
		}
		return false
	})
	n := tr.get("u1/app")
	e.eventually("another failed probe", func() bool {
		for _, s := range e.mgr.Snapshots() {
			if s.ProbeType == "Liveness" && len(s.History) >= 2 && s.History[len(s.History)-1].Result == "failure" &&
				s.History[len(s.History)-2].Result == "failure" {
				return true
			}
		}
		return false
	})
	if tr.get("u1/app") != n {
		t.Error("a failure was heard as a pass")
	}
	// Removing the liveness probe counts as passing: the container no longer fails it.
	pod.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}})
	e.update(pod)
	e.eventually("removal heard", func() bool { return tr.get("u1/app") == n+1 })
	if err := e.client.CoreV1().Pods("ns").Delete(context.Background(), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("pod forgotten", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.forgot["u1"]
	})
}

// countingKiller stands in for the runtime: it counts kills per pod.
type countingKiller struct {
	mu    sync.Mutex
	kills map[string]int
}

func (k *countingKiller) Kill(_ context.Context, pod *v1.Pod, _ *v1.Container, _ string, _ probespec.ProbeType, _ *v1.Probe) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kills[pod.Name]++
	return nil
}

func (k *countingKiller) total() (pods, kills int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, n := range k.kills {
		pods++
		kills += n
	}
	return pods, kills
}

// TestWorkloadGuardEndToEnd wires the real restart guard into the manager:
// four replicas of a ReplicaSet fail liveness together; two are restarted,
// the other two are paused (and re-probed), and when those recover they are
// never restarted.
func TestWorkloadGuardEndToEnd(t *testing.T) {
	inner := &countingKiller{kills: map[string]int{}}
	var workloads *kill.Workloads
	rec := &recorder{}
	e := newEnvWith(t, func(o *Options) {
		owned, err := kill.IndexByController(o.Informer)
		if err != nil {
			t.Fatal(err)
		}
		workloads = kill.NewWorkloads(owned, nil, 0, nil)
		o.Killer = &kill.Guard{Inner: inner, Workloads: workloads, Recorder: rec}
		o.Liveness = workloads
	})
	yes := true
	for i := range 4 {
		name := string(rune('a' + i))
		pod := runningPod("web-"+name, "u-"+name, annotate(map[string]map[string]any{"app": {"livenessProbe": failingLiveness}}), "app")
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-web", Controller: &yes}}
		e.create(pod)
	}
	// All four healthy first, so that the guard knows them all...
	for _, name := range []string{"a", "b", "c", "d"} {
		e.eventually("liveness of web-"+name+" probed", func() bool {
			e.prober.mu.Lock()
			defer e.prober.mu.Unlock()
			return e.prober.calls["containerd://u-"+name+"-app/Liveness"] > 0
		})
	}
	// ...then they fail together.
	e.prober.mu.Lock()
	for _, name := range []string{"a", "b", "c", "d"} {
		e.prober.result["containerd://u-"+name+"-app"] = results.Failure
	}
	e.prober.mu.Unlock()
	e.eventually("two restarts and a pause", func() bool {
		pods, _ := inner.total()
		return pods == 2 && len(workloads.Paused()) == 1
	})
	e.eventually("the paused pods re-probed and paused again", func() bool {
		msgs := rec.byReason(kill.ReasonRestartsPaused)
		return len(msgs) >= 2
	})
	for _, m := range rec.byReason(kill.ReasonRestartsPaused) {
		if m.message != "liveness failing on 3 of 4 pods of ReplicaSet ns/web on this node; pausing restarts" &&
			m.message != "liveness failing on 4 of 4 pods of ReplicaSet ns/web on this node; pausing restarts" {
			t.Errorf("RestartsPaused %q", m.message)
		}
	}
	// The outage ends: the paused pods pass their fresh probes and are
	// never restarted; the pause lifts.
	e.prober.mu.Lock()
	for id := range e.prober.result {
		e.prober.result[id] = results.Success
	}
	e.prober.mu.Unlock()
	e.eventually("pause lifted", func() bool { return len(workloads.Paused()) == 0 })
	pods, _ := inner.total()
	if pods != 2 {
		t.Errorf("%d pods restarted; want 2 of 4", pods)
	}
}

func (r *recorder) byReason(reason string) []recEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recEvent
	for _, e := range r.events {
		if e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}
