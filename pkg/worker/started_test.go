package worker

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/results"
)

// The started rule, as the manager's pushed facts and the startup results
// decide it, without the manager.
func TestPodStarted(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		name        string
		probe       StartupProbe
		result      *results.Result
		kubeletSpec bool
		forget      bool
		want        bool
	}{
		{name: "no startup probe", want: true},
		{name: "live worker, no result", probe: StartupProbe{Live: true}, want: false},
		{name: "invalid probe gates", probe: StartupProbe{Invalid: true}, want: false},
		{name: "ended worker", probe: StartupProbe{Ended: true}, want: true},
		{name: "success", probe: StartupProbe{Live: true}, result: ptr(results.Success), want: true},
		{name: "failure", result: ptr(results.Failure), want: false},
		{name: "kubelet's startup probe: its started", kubeletSpec: true, want: true},
		{name: "pod forgotten", probe: StartupProbe{Live: true}, forget: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rm := results.NewManager()
			pod := runningPod(epoch)
			pod.Spec.Containers[0].StartupProbe = &v1.Probe{}
			cs := &pod.Status.ContainerStatuses[0]
			cs.Started = &yes
			if tc.result != nil {
				rm.Set(testID, results.Value{Result: *tc.result}, pod)
			}
			s := NewPodStarted(rm, tc.kubeletSpec)
			s.Set(map[string]StartupProbe{testContainer: tc.probe})
			if tc.forget {
				s.Forget()
			}
			if got := s.Started(pod, cs); got != tc.want {
				t.Errorf("Started = %v; want %v", got, tc.want)
			}
		})
	}
	// The kubelet's started wins where it runs the startup probe.
	pod := runningPod(epoch)
	pod.Spec.Containers[0].StartupProbe = &v1.Probe{}
	if NewPodStarted(results.NewManager(), true).Started(pod, &pod.Status.ContainerStatuses[0]) {
		t.Error("started without the kubelet's started")
	}
}

func ptr[T any](v T) *T { return &v }
