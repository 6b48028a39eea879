package manager

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/status"
)

func (e *env) setResult(id string, r results.Result) {
	e.prober.mu.Lock()
	e.prober.result[id] = r
	e.prober.mu.Unlock()
}

// waitHeld waits until a probe has reached one of the prober's holds.
func (e *env) waitHeld() {
	e.t.Helper()
	e.eventually("the new probe in flight", func() bool {
		e.prober.mu.Lock()
		defer e.prober.mu.Unlock()
		return e.prober.held > 0
	})
}

func (e *env) readyStates(uid string) int {
	e.sink.mu.Lock()
	defer e.sink.mu.Unlock()
	return e.sink.ready[uidOf(uid)]
}

func tcpPort(port int, failureThreshold int) map[string]any {
	return map[string]any{"tcpSocket": map[string]any{"port": port}, "periodSeconds": 1, "failureThreshold": failureThreshold}
}

// seededThenFailed creates a pod whose container app gets a Success seed,
// read back from its condition after a restart of probed (seeded) or
// carried by an edit of its readiness probe, and then fails readiness.
func (e *env) seededThenFailed(uid, id string, seeded bool) *v1.Pod {
	e.t.Helper()
	pod := runningPod("p", uid, annotate(map[string]map[string]any{"app": {"readinessProbe": tcpPort(1, 1)}}), "app")
	if seeded {
		pod.Status.Conditions = []v1.PodCondition{{
			Type: status.ReadyConditionType("app"), Status: v1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Now().Add(-30 * time.Second)),
		}}
	}
	e.create(pod)
	e.eventually("ready", e.readyNow(uid))
	if !seeded {
		// The first edit carries the Success as a seed.
		pod.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{"app": {"readinessProbe": tcpPort(2, 1)}})
		e.update(pod)
		e.eventually("the edited probe ran", func() bool {
			e.prober.mu.Lock()
			defer e.prober.mu.Unlock()
			return e.prober.calls[id+"/Readiness"] >= 2
		})
	}
	e.setResult(id, results.Failure)
	e.eventually("not ready", func() bool { return !e.readyNow(uid)() })
	return pod
}

// A seed holds only while nothing newer is known for the container
// instance. Edit, fail, edit again: the condition never turns True again,
// whether the seed was carried by the first edit or read back after a
// restart of probed.
func TestStaleSeedDoesNotBringReadyBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		// seeded: the pod carries the condition an earlier probed wrote.
		seeded bool
	}{
		{"seed carried by an earlier edit", false},
		{"seed read back after a restart of probed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, probespec.ProbeSourceAnnotation)
			const uid, id = "s1", "containerd://s1-app"
			pod := e.seededThenFailed(uid, id, tc.seeded)

			// Edit again, and hold the new probe's first run: until it
			// answers, nothing newer than the failure is known.
			release := make(chan struct{})
			defer close(release)
			e.prober.mu.Lock()
			e.prober.hold = map[int32]chan struct{}{3: release}
			e.prober.mu.Unlock()
			before := e.readyStates(uid)
			old := e.mgr.pods[uidOf(uid)].workers[probeKey{"app", probespec.Readiness}]
			pod.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{"app": {"readinessProbe": tcpPort(3, 1)}})
			e.update(pod)
			<-old.Done()
			e.waitHeld()
			e.eventually("the edit processed", func() bool { return e.mgr.queue.Len() == 0 })
			if n := e.readyStates(uid) - before; n > 0 {
				t.Errorf("a failing container was reported ready %d times after the second edit", n)
			}
			if e.readyNow(uid)() {
				t.Error("ready after the second edit, before the new probe answered")
			}
		})
	}
}

// The kubelet's readiness trigger (UpdatePodStatus) fires for a container
// that is not ready on every sync. A seeded container that has since failed
// readiness is not ready either: a sync triggers its probe at once, not at
// the worker's next tick (30 s here, past the test's deadline).
func TestSeededContainerStillGetsTheReadinessTrigger(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	const uid, id = "s2", "containerd://s2-app"
	slow := map[string]any{"tcpSocket": map[string]any{"port": 1}, "periodSeconds": 30, "failureThreshold": 1}
	pod := runningPod("p", uid, annotate(map[string]map[string]any{"app": {"readinessProbe": slow}}), "app")
	pod.Status.Conditions = []v1.PodCondition{{
		Type: status.ReadyConditionType("app"), Status: v1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-30 * time.Second)),
	}}
	e.setResult(id, results.Failure)
	e.create(pod)
	calls := func() int {
		e.prober.mu.Lock()
		defer e.prober.mu.Unlock()
		return e.prober.calls[id+"/Readiness"]
	}
	// The worker's first probe (no jitter: probed started long ago) fails.
	e.eventually("the seeded container failed readiness", func() bool { return calls() >= 1 && !e.readyNow(uid)() })
	n := calls()

	e.setResult(id, results.Success)
	pod.Labels = map[string]string{"sync": "1"}
	e.update(pod)
	e.eventually("ready again at once, on the sync's trigger", func() bool { return calls() > n && e.readyNow(uid)() })
}

// A seed belongs to the worker it was handed to: a probe that leaves the
// declared set (removed, or made invalid) stops without a carry, and when it
// comes back its new worker starts from the kubelet's initial value, not
// from a Success that a failure has since overtaken.
func TestSeedDoesNotOutliveItsProbe(t *testing.T) {
	for _, tc := range []struct {
		name string
		// seeded: the pod carries the condition an earlier probed wrote;
		// otherwise an edit carries the seed.
		seeded bool
		// leave is the annotation the probe leaves the declared set with.
		leave map[string]map[string]any
	}{
		{"removed then re-added, seed read back after a restart of probed", true,
			map[string]map[string]any{"app": {}}},
		{"removed then re-added, seed carried by an edit", false,
			map[string]map[string]any{"app": {}}},
		{"made invalid then fixed", true,
			map[string]map[string]any{"app": {"readinessProbe": map[string]any{"tcpSocket": map[string]any{"port": 0}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, probespec.ProbeSourceAnnotation)
			const uid, id = "s3", "containerd://s3-app"
			pod := e.seededThenFailed(uid, id, tc.seeded)

			// The probe leaves the declared set: its worker stops, no carry.
			old := e.mgr.pods[uidOf(uid)].workers[probeKey{"app", probespec.Readiness}]
			pod.Annotations[probespec.ProbesAnnotation] = annotate(tc.leave)
			e.update(pod)
			<-old.Done()

			// It comes back; its first run is held, so nothing newer than
			// the failure is known for the instance until it answers.
			release := make(chan struct{})
			defer close(release)
			e.prober.mu.Lock()
			e.prober.hold = map[int32]chan struct{}{3: release}
			e.prober.mu.Unlock()
			e.setResult(id, results.Success)
			pod.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{"app": {"readinessProbe": tcpPort(3, 1)}})
			e.update(pod)
			e.waitHeld()
			e.eventually("the re-added probe in the desired state", func() bool {
				st, ok := e.sink.get(uidOf(uid))
				return ok && len(st.Containers) == 1 && st.Containers[0].HasReadiness && st.Containers[0].ReadyReason != status.ReasonInvalidProbe
			})
			if st, _ := e.sink.get(uidOf(uid)); st.Containers[0].Ready {
				t.Errorf("ready (%s) before the re-added probe answered; its last result was Failure", st.Containers[0].ReadyReason)
			}
		})
	}
}

// The kubelet's UpdatePodStatus triggers a readiness probe whenever no
// result is known for a running container, and after a restart of its own
// none is (KEP-4781 keeps Ready meanwhile). A container seeded after a
// restart of probed is in the same state: Ready from what probed had
// established, and no probe of this worker has confirmed it. It gets the
// trigger, instead of waiting out the start-up jitter and its period
// (here on a clock that never moves: without the trigger, no probe).
func TestSeededContainerGetsTheReadinessTriggerAfterARestart(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	e := newEnvWith(t, func(o *Options) {
		o.Clock = clk
		o.DaemonStart = clk.Now() // just restarted: every worker starts with a jitter
	})
	const uid, id = "s4", "containerd://s4-app"
	slow := map[string]any{"tcpSocket": map[string]any{"port": 1}, "periodSeconds": 30}
	pod := runningPod("p", uid, annotate(map[string]map[string]any{"app": {"readinessProbe": slow}}), "app")
	pod.Status.Conditions = []v1.PodCondition{{
		Type: status.ReadyConditionType("app"), Status: v1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-30 * time.Second)),
	}}
	e.create(pod)
	e.eventually("ready from the seed", e.readyNow(uid))
	e.eventually("a readiness probe, triggered", func() bool {
		e.prober.mu.Lock()
		defer e.prober.mu.Unlock()
		return e.prober.calls[id+"/Readiness"] > 0
	})
	if e.readyStates(uid) == 0 || !e.readyNow(uid)() {
		t.Error("not ready after the triggered probe succeeded")
	}
	e.sink.mu.Lock()
	defer e.sink.mu.Unlock()
	if n := e.sink.notReady[uidOf(uid)]; n > 0 {
		t.Errorf("the seeded container was reported not ready %d times", n)
	}
}
