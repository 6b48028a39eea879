package worker

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// The worker fills Target.PodIPs from the pod it probes (status.podIPs,
// then status.podIP, without blanks or repeats), so the manager need not
// read the pod again; a change of the IPs reaches the next probe.
func TestProbeTargetPodIPs(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{})
	pod := runningPod(epoch)
	pod.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.7"}, {IP: ""}, {IP: "fd00::7"}, {IP: "10.0.0.7"}}
	e.pods.set(pod)
	target := func() []string {
		t.Helper()
		if !w.doProbe(context.Background()) {
			t.Fatal("doProbe stopped the worker")
		}
		<-e.prober.calls
		e.prober.mu.Lock()
		defer e.prober.mu.Unlock()
		return e.prober.target.PodIPs
	}
	if got := target(); !slices.Equal(got, []string{"10.0.0.7", "fd00::7"}) {
		t.Errorf("Target.PodIPs = %q; want status.podIPs without blanks or repeats", got)
	}
	moved := pod.DeepCopy()
	moved.Status.PodIP, moved.Status.PodIPs = "10.0.0.8", nil
	e.pods.set(moved)
	if got := target(); !slices.Equal(got, []string{"10.0.0.8"}) {
		t.Errorf("Target.PodIPs = %q after the pod's IP changed; want [10.0.0.8]", got)
	}
	moved = moved.DeepCopy()
	moved.Status.PodIP = ""
	e.pods.set(moved)
	if got := target(); len(got) != 0 {
		t.Errorf("Target.PodIPs = %q for a pod without IPs", got)
	}
}

func TestPodIPs(t *testing.T) {
	pod := &v1.Pod{Status: v1.PodStatus{PodIP: "10.0.0.9", PodIPs: []v1.PodIP{{IP: "fd00::9"}, {IP: "fd00::9"}}}}
	if got := PodIPs(pod); !slices.Equal(got, []string{"fd00::9", "10.0.0.9"}) {
		t.Errorf("PodIPs = %q", got)
	}
	if got := PodIPs(nil); got != nil {
		t.Errorf("PodIPs(nil) = %q", got)
	}
}
