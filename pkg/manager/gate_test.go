package manager

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/status"
)

// Issue 12 item 5: a probed readiness probe on a pod without the
// probed.io/ready readiness gate does nothing for Services. probed says so,
// once per pod, with a Warning and a gauge; liveness-only pods and gated
// pods are left alone.
func TestMissingReadinessGateIsReported(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	ungated := runningPod("ungated", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
	gated := runningPod("gated", "u2", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
	gated.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: status.PodReadyCondition}}
	livenessOnly := runningPod("live", "u3", annotate(map[string]map[string]any{"app": {"livenessProbe": tcp1}}), "app")
	for _, p := range []*v1.Pod{ungated, gated, livenessOnly} {
		e.create(p)
	}
	e.eventually("three pods' workers", func() bool { return e.mgr.WorkerCount() == 3 })
	e.eventually("the Warning", func() bool { return e.rec.count(ReasonMissingReadinessGate) == 1 })
	if got := testutil.ToFloat64(e.mgr.opts.Metrics.ungated); got != 1 {
		t.Errorf("probed_pods_without_readiness_gate = %v; want 1", got)
	}
	e.rec.mu.Lock()
	for _, ev := range e.rec.events {
		if ev.reason == ReasonMissingReadinessGate && (ev.eventType != v1.EventTypeWarning || !strings.Contains(ev.message, "container(s) app") || !strings.Contains(ev.message, "probed.io/ready")) {
			t.Errorf("event %+v", ev)
		}
	}
	e.rec.mu.Unlock()

	// Later syncs of the same pod do not repeat it.
	ungated.Labels = map[string]string{"touched": "1"}
	e.update(ungated)
	if err := e.mgr.sync(t.Context(), "ns/ungated"); err != nil {
		t.Fatal(err)
	}
	if n := e.rec.count(ReasonMissingReadinessGate); n != 1 {
		t.Errorf("%d Warnings; want 1 per pod", n)
	}
	// The pod goes: the gauge follows.
	if err := e.client.CoreV1().Pods("ns").Delete(t.Context(), "ungated", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the gauge back to 0", func() bool { return testutil.ToFloat64(e.mgr.opts.Metrics.ungated) == 0 })
}

// A static pod's readiness gates are read from the static pod, never from
// its mirror, where probed writes: the gate would keep it from ever being
// Ready. No Warning steers there, and the gauge does not count it.
func TestNoReadinessGateWarningForMirrorPods(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	mirror := runningPod("static-web", "m1", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
	mirror.Annotations[v1.MirrorPodAnnotationKey] = "hash"
	e.create(mirror)
	// The worker starts in the same locked step of a sync as the gate check.
	e.eventually("its worker", func() bool { return e.mgr.WorkerCount() == 1 })
	e.mgr.mu.Lock()
	ungated, warned := e.mgr.pods["m1"].ungated, e.mgr.pods["m1"].gateWarned
	e.mgr.mu.Unlock()
	if ungated || warned {
		t.Errorf("a mirror pod counted as ungated (%v) or warned about (%v)", ungated, warned)
	}
	if err := e.mgr.sync(t.Context(), "ns/static-web"); err != nil {
		t.Fatal(err)
	}
	if n := e.rec.count(ReasonMissingReadinessGate); n != 0 {
		t.Errorf("%d MissingReadinessGate Warnings for a mirror pod", n)
	}
	if got := testutil.ToFloat64(e.mgr.opts.Metrics.ungated); got != 0 {
		t.Errorf("probed_pods_without_readiness_gate = %v; want 0", got)
	}
}
