package status

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/probed-dev/probed/pkg/containerstatus"
)

// gatedPod is webPod with a sidecar and a readiness gate that is True, on a
// node where nothing else sets ready/started.
func gatedPod() *v1.Pod {
	p := webPod()
	p.Spec.InitContainers = []v1.Container{{Name: "proxy", RestartPolicy: ptrTo(v1.ContainerRestartPolicyAlways)}}
	p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "proxy", ContainerID: "containerd://proxy", Ready: true, Started: ptrTo(true),
		State: p.Status.ContainerStatuses[0].State}}
	for i := range p.Status.ContainerStatuses {
		p.Status.ContainerStatuses[i].Ready = false
		p.Status.ContainerStatuses[i].Started = nil
	}
	p.Status.Conditions = append(p.Status.Conditions,
		v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue},
		v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: kubeletContainersNotReady},
	)
	p.Status.Conditions[1].Status = v1.ConditionFalse // Ready
	return p
}

func (h *harness) gets() int {
	n := 0
	for _, a := range h.cs.Actions() {
		if a.GetVerb() == "get" {
			n++
		}
	}
	return n
}

func TestContainerStatusMode(t *testing.T) {
	h := newHarness(t, Options{Mode: ModeContainerStatus}, gatedPod())
	var concurrent atomic.Pointer[func()]
	h.enforceResourceVersion(func() {
		if f := concurrent.Swap(nil); f != nil {
			(*f)()
		}
	})
	h.start()

	// app ready, db not: ContainersReady and Ready False.
	h.w.Set(webKey, readiness("", []string{"app", "db"}, true, false))
	h.settle()
	if got := h.writes(); got != 1 {
		t.Fatalf("writes = %d, want 1", got)
	}
	act := h.lastWrite()
	if act.GetPatchType() != "application/strategic-merge-patch+json" || act.PatchOptions.FieldManager != FieldManager {
		t.Errorf("write is %s by %q", act.GetPatchType(), act.PatchOptions.FieldManager)
	}
	p := h.pod("web")
	app, db := containerstatus.Find(p, "app"), containerstatus.Find(p, "db")
	if !app.Ready || app.Started == nil || !*app.Started || db.Ready || db.Started == nil || !*db.Started {
		t.Errorf("app ready=%t started=%v, db ready=%t started=%v", app.Ready, app.Started, db.Ready, db.Started)
	}
	if c := cond(p, v1.ContainersReady); c.Status != v1.ConditionFalse || c.Message != "containers with unready status: [db]" {
		t.Errorf("ContainersReady = %+v", c)
	}
	if c := cond(p, v1.PodReady); c.Status != v1.ConditionFalse || c.Reason != kubeletContainersNotReady {
		t.Errorf("Ready = %+v", c)
	}
	if p.ResourceVersion != "2" {
		t.Errorf("resourceVersion = %s", p.ResourceVersion)
	}

	// db ready too: both True, the gate is True.
	h.clock.Step(time.Second)
	h.w.Set(webKey, readiness("", []string{"app", "db"}, true, true))
	h.settle()
	p = h.pod("web")
	for _, typ := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		if c := cond(p, typ); c.Status != v1.ConditionTrue || !c.LastTransitionTime.Time.Equal(t0.Add(time.Second)) {
			t.Errorf("%s = %+v", typ, c)
		}
	}
	if owned := OwnedConditions(p.Status.Conditions); len(owned) != 0 {
		t.Errorf("container-status mode wrote probed conditions: %v", summarize(owned))
	}

	// Same state, message-only change: no write, no read.
	gets := h.gets()
	h.w.Set(webKey, readiness("other message", []string{"app", "db"}, true, true))
	h.settle()
	if h.writes() != 2 || h.gets() != gets {
		t.Errorf("writes = %d, gets = %d (was %d)", h.writes(), h.gets(), gets)
	}

	// A concurrent writer changes the pod between our read and our write:
	// Conflict, fresh read, and its change survives ours.
	f := func() {
		h.mutate("web", func(p *v1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: "example.com/concurrent", Status: v1.ConditionTrue})
			cond(p, "example.com/gate").Status = v1.ConditionFalse
			containerstatus.Find(p, "db").RestartCount = 5
		})
	}
	concurrent.Store(&f)
	h.w.Set(webKey, readiness("", []string{"app", "db"}, false, true))
	h.settle()
	p = h.pod("web")
	if c := cond(p, "example.com/concurrent"); c == nil {
		t.Error("the concurrent writer's condition was lost")
	}
	if db := containerstatus.Find(p, "db"); db.RestartCount != 5 || !db.Ready {
		t.Errorf("db = restarts %d ready %t: the concurrent change was lost", db.RestartCount, db.Ready)
	}
	if app := containerstatus.Find(p, "app"); app.Ready {
		t.Error("app still ready")
	}
	if c := cond(p, v1.PodReady); c.Status != v1.ConditionFalse || c.Reason != kubeletContainersNotReady {
		t.Errorf("Ready = %+v", c)
	}
	if got := h.count(OutcomeConflict); got != 1 {
		t.Errorf("conflict count = %d, want 1", got)
	}
	if got := h.count(OutcomeSuccess); got != 3 {
		t.Errorf("success count = %d, want 3", got)
	}

	// The gate goes False under everyone's feet: app ready again, Ready
	// stays False because of the gate.
	h.w.Set(webKey, readiness("", []string{"app", "db"}, true, true))
	h.settle()
	p = h.pod("web")
	if c := cond(p, v1.ContainersReady); c.Status != v1.ConditionTrue {
		t.Errorf("ContainersReady = %+v", c)
	}
	if c := cond(p, v1.PodReady); c.Status != v1.ConditionFalse || c.Reason != kubeletReadinessGatesNotReady {
		t.Errorf("Ready = %+v", c)
	}

	// The gate turns True; the heartbeat brings Ready in line.
	h.mutate("web", func(p *v1.Pod) { cond(p, "example.com/gate").Status = v1.ConditionTrue })
	h.heartbeat()
	if c := cond(h.pod("web"), v1.PodReady); c.Status != v1.ConditionTrue {
		t.Errorf("Ready after heartbeat = %+v", c)
	}
}

func TestContainerStatusModeGivesUpAfterConflicts(t *testing.T) {
	h := newHarness(t, Options{Mode: ModeContainerStatus}, gatedPod())
	h.enforceResourceVersion(func() { h.mutate("web", func(*v1.Pod) {}) }) // always someone first
	h.start()
	h.w.Set(webKey, appReady(true, ""))
	h.retryAt(webKey.UID)
	if got := h.count(OutcomeConflict); got != maxConflictAttempts {
		t.Errorf("conflicts = %d, want %d", got, maxConflictAttempts)
	}
	h.w.Forget(webKey.UID)
}

func TestContainerStatusModeAlreadyInPlace(t *testing.T) {
	p := gatedPod()
	h := newHarness(t, Options{Mode: ModeContainerStatus}, p)
	h.cache.freeze(p) // stale: the API server already has what we want
	h.enforceResourceVersion(nil)
	h.mutate("web", func(p *v1.Pod) {
		st := p.DeepCopy()
		setContainerStatus(st, appReady(true, ""), metav1Now())
		p.Status = st.Status
	})
	h.start()
	h.w.Set(webKey, appReady(true, ""))
	h.settle()
	if got := h.writes(); got != 0 {
		t.Errorf("writes = %d, want 0", got)
	}
	if got := h.gets(); got != 1 {
		t.Errorf("gets = %d, want 1", got)
	}
	// Nothing to do for a pod with no probed container.
	h.w.Set(webKey, PodState{})
	h.settle()
	if got := h.gets(); got != 1 {
		t.Errorf("gets = %d, want 1", got)
	}
}

func TestContainerStatusModePodReplaced(t *testing.T) {
	h := newHarness(t, Options{Mode: ModeContainerStatus}, gatedPod())
	h.cache.freeze(gatedPod())
	h.mutate("web", func(p *v1.Pod) { p.UID = "uid-new" }) // same name, another pod
	h.start()
	h.w.Set(webKey, appReady(true, ""))
	h.settle()
	if got := h.writes(); got != 0 {
		t.Errorf("wrote to a pod that replaced ours: %d", got)
	}
	if got := h.count(OutcomeNotFound); got != 1 {
		t.Errorf("not_found = %d", got)
	}
}

func TestContainerStatusModeReadErrors(t *testing.T) {
	h := newHarness(t, Options{Mode: ModeContainerStatus}, gatedPod())
	var fails atomic.Int32
	fails.Store(1)
	h.cs.PrependReactor("get", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if fails.Add(-1) >= 0 {
			return true, nil, apierrors.NewTooManyRequests("slow down", 1)
		}
		return false, nil, nil
	})
	h.start()
	h.w.Set(webKey, appReady(true, ""))
	due := h.retryAt(webKey.UID)
	if got := h.count(OutcomeError); got != 1 {
		t.Errorf("error count = %d", got)
	}
	h.clock.Step(due.Sub(h.clock.Now()))
	h.settle()
	if !containerstatus.Find(h.pod("web"), "app").Ready {
		t.Error("not written after the read recovered")
	}
	if n := len(h.cs.Actions()); n != 3 { // get (failed), get, patch
		t.Errorf("actions = %d, want 3", n)
	}
}

func TestContainerStatusModeNotFound(t *testing.T) {
	h := newHarness(t, Options{Mode: ModeContainerStatus}, gatedPod())
	h.cs.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(v1.Resource("pods"), "web")
	})
	h.start()
	h.w.Set(webKey, appReady(true, ""))
	h.settle()
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if _, known := h.w.pods[webKey.UID]; known {
		t.Error("pod not dropped after 404")
	}
}

func TestContainerStatusModeError(t *testing.T) {
	h := newHarness(t, Options{Mode: ModeContainerStatus}, gatedPod())
	h.failWrites(1, apierrors.NewInternalError(errors.New("etcd timeout")))
	h.start()
	h.w.Set(webKey, appReady(true, ""))
	due := h.retryAt(webKey.UID)
	h.clock.Step(due.Sub(h.clock.Now()))
	h.settle()
	if !containerstatus.Find(h.pod("web"), "app").Ready {
		t.Error("not written after the error")
	}
	if h.count(OutcomeError) != 1 || h.count(OutcomeSuccess) != 1 {
		t.Errorf("error=%d success=%d", h.count(OutcomeError), h.count(OutcomeSuccess))
	}
}

func metav1Now() metav1.Time { return metav1.NewTime(t0) }

// 1.35+ kubelets (PodObservedGenerationTracking, GA) set observedGeneration
// on the conditions they own to the pod's metadata.generation; in
// container-status mode probed writes ContainersReady and Ready for them,
// and a new generation (an in-place resize, say) is written even when
// readiness stays the same.
func TestContainerStatusModeObservedGeneration(t *testing.T) {
	p := gatedPod()
	p.Generation = 3
	h := newHarness(t, Options{Mode: ModeContainerStatus}, p)
	h.enforceResourceVersion(nil)
	h.start()
	state := readiness("", []string{"app", "db"}, true, true)
	state.Generation = 3
	h.w.Set(webKey, state)
	h.settle()
	for _, typ := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		if c := cond(h.pod("web"), typ); c.ObservedGeneration != 3 {
			t.Errorf("%s observedGeneration = %d, want the pod's generation 3", typ, c.ObservedGeneration)
		}
	}
	writes := h.writes()

	h.mutate("web", func(p *v1.Pod) { p.Generation = 4 })
	state.Generation = 4
	h.w.Set(webKey, state)
	h.settle()
	if h.writes() != writes+1 {
		t.Errorf("writes = %d, want one more for the new generation", h.writes()-writes)
	}
	for _, typ := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		if c := cond(h.pod("web"), typ); c.ObservedGeneration != 4 || c.Status != v1.ConditionTrue {
			t.Errorf("%s = %+v, want True at generation 4", typ, c)
		}
	}
}
