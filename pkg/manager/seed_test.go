package manager

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/prober"
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
			pod := runningPod("p", uid, annotate(map[string]map[string]any{"app": {"readinessProbe": tcpPort(1, 1)}}), "app")
			if tc.seeded {
				pod.Status.Conditions = []v1.PodCondition{{
					Type: status.ReadyConditionType("app"), Status: v1.ConditionTrue,
					LastTransitionTime: metav1.NewTime(time.Now().Add(-30 * time.Second)),
				}}
			}
			e.create(pod)
			e.eventually("ready", e.readyNow(uid))
			if !tc.seeded {
				// The first edit carries the Success as a seed.
				pod.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{"app": {"readinessProbe": tcpPort(2, 1)}})
				e.update(pod)
				e.eventually("the edited probe ran", func() bool {
					e.prober.mu.Lock()
					defer e.prober.mu.Unlock()
					return e.prober.calls[id+"/Readiness"] >= 2
				})
			}
			// The container fails readiness.
			e.setResult(id, results.Failure)
			e.eventually("not ready", func() bool { return !e.readyNow(uid)() })

			// Edit again, and hold the new probe's first run: until it
			// answers, nothing newer than the failure is known.
			release := make(chan struct{})
			defer close(release)
			e.prober.mu.Lock()
			e.prober.hold = map[int32]chan struct{}{3: release}
			e.prober.mu.Unlock()
			before := e.readyStates(uid)
			old := e.mgr.pods[uidOf(uid)].workers[probeKey{"app", prober.Readiness}]
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
