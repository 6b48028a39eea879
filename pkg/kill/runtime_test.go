package kill

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

func i64(v int64) *int64 { return &v }

func TestGracePeriod(t *testing.T) {
	pod := func(deletion, spec *int64) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{DeletionGracePeriodSeconds: deletion},
			Spec:       v1.PodSpec{TerminationGracePeriodSeconds: spec},
		}
	}
	probe := func(grace *int64) *v1.Probe { return &v1.Probe{TerminationGracePeriodSeconds: grace} }

	tests := []struct {
		name  string
		pod   *v1.Pod
		probe *v1.Probe
		want  time.Duration
	}{
		{"pod deletion grace wins over all", pod(i64(5), i64(60)), probe(i64(10)), 5 * time.Second},
		{"zero deletion grace is set", pod(i64(0), i64(60)), probe(i64(10)), 0},
		{"probe grace over pod spec", pod(nil, i64(60)), probe(i64(10)), 10 * time.Second},
		{"probe grace above the pod's", pod(nil, i64(5)), probe(i64(90)), 90 * time.Second},
		{"probe grace without pod spec", pod(nil, nil), probe(i64(7)), 7 * time.Second},
		{"pod spec grace", pod(nil, i64(60)), probe(nil), 60 * time.Second},
		{"pod spec zero grace", pod(nil, i64(0)), probe(nil), 0},
		{"nothing set: the kubelet's minimum", pod(nil, nil), probe(nil), 2 * time.Second},
		{"nil probe", pod(nil, i64(45)), nil, 45 * time.Second},
		{"nil pod", nil, probe(nil), 2 * time.Second},
		{"negative clamps to zero", pod(i64(-1), nil), nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := GracePeriod(tc.pod, "app", tc.probe); got != tc.want {
				t.Errorf("GracePeriod = %v, want %v", got, tc.want)
			}
		})
	}
}

type fakeStopper struct {
	id    string
	grace time.Duration
	calls int
	err   error
}

func (s *fakeStopper) StopContainer(_ context.Context, id string, grace time.Duration) error {
	s.id, s.grace = id, grace
	s.calls++
	return s.err
}

// besideRunning adds a running container "other" to pod.
func besideRunning(pod *v1.Pod) *v1.Pod {
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "other"})
	pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
		Name: "other", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}})
	return pod
}

func TestKillMessage(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	withPolicy := func(p v1.RestartPolicy) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{RestartPolicy: p, Containers: []v1.Container{{Name: "app"}}}}
	}
	withContainerPolicy := func(p v1.RestartPolicy, c v1.ContainerRestartPolicy) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{RestartPolicy: p, Containers: []v1.Container{{Name: "app", RestartPolicy: &c}}}}
	}
	sidecarPod := &v1.Pod{Spec: v1.PodSpec{
		RestartPolicy:  v1.RestartPolicyNever,
		InitContainers: []v1.Container{{Name: "proxy", RestartPolicy: &always}, {Name: "setup"}},
	}}
	tests := []struct {
		pod       *v1.Pod
		container string
		pt        probespec.ProbeType
		want      string
	}{
		{withPolicy(v1.RestartPolicyAlways), "app", probespec.Liveness, "Container app failed liveness probe, will be restarted"},
		// Under OnFailure the kubelet's own kill restarts whatever the exit
		// code; after probed's stop only a non-zero exit is restarted.
		{withPolicy(v1.RestartPolicyOnFailure), "app", probespec.Startup, "Container app failed startup probe, will be restarted unless it exits with code 0"},
		// Not restarted, beside a container that runs: only killed.
		{besideRunning(withPolicy(v1.RestartPolicyNever)), "app", probespec.Liveness, "Container app failed liveness probe"},
		// Not restarted, and the pod's last: the kubelet kills the pod.
		{withPolicy(v1.RestartPolicyNever), "app", probespec.Liveness, "Stopping container app"},
		// A container's own restartPolicy comes first (KEP-5307).
		{withContainerPolicy(v1.RestartPolicyNever, v1.ContainerRestartPolicyAlways), "app", probespec.Liveness, "Container app failed liveness probe, will be restarted"},
		{besideRunning(withContainerPolicy(v1.RestartPolicyAlways, v1.ContainerRestartPolicyNever)), "app", probespec.Liveness, "Container app failed liveness probe"},
		{withContainerPolicy(v1.RestartPolicyAlways, v1.ContainerRestartPolicyNever), "app", probespec.Startup, "Stopping container app"},
		{withContainerPolicy(v1.RestartPolicyAlways, v1.ContainerRestartPolicyOnFailure), "app", probespec.Liveness, "Container app failed liveness probe, will be restarted unless it exits with code 0"},
		{sidecarPod, "proxy", probespec.Liveness, "Init container proxy failed liveness probe"},
		{sidecarPod, "proxy", probespec.Startup, "Init container proxy failed startup probe"},
		{sidecarPod, "setup", probespec.Liveness, "Container setup failed liveness probe"},
		{nil, "app", probespec.Liveness, "Container app failed liveness probe, will be restarted"},
	}
	for _, tc := range tests {
		if got := KillMessage(tc.pod, tc.container, tc.pt); got != tc.want {
			t.Errorf("KillMessage(%s, %v) = %q, want %q", tc.container, tc.pt, got, tc.want)
		}
	}
}

func TestRuntimeKiller(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: i64(60)},
	}
	container := &v1.Container{Name: "app"}
	spec := &v1.Probe{TerminationGracePeriodSeconds: i64(12)}

	t.Run("event then stop", func(t *testing.T) {
		rec, stopper := &killLog{}, &fakeStopper{}
		k := &RuntimeKiller{Runtime: stopper, Recorder: logRecorder{rec}}
		if err := k.Kill(context.Background(), pod, container, "containerd://abc", probespec.Liveness, spec); err != nil {
			t.Fatal(err)
		}
		if ev := rec.list(); len(ev) != 1 || ev[0] != "event app Normal Killing: Container app failed liveness probe, will be restarted" {
			t.Errorf("events = %q", ev)
		}
		if stopper.calls != 1 || stopper.id != "containerd://abc" || stopper.grace != 12*time.Second {
			t.Errorf("StopContainer(%q, %v) x%d", stopper.id, stopper.grace, stopper.calls)
		}
	})
	t.Run("event only", func(t *testing.T) {
		rec, stopper := &killLog{}, &fakeStopper{}
		k := &RuntimeKiller{Runtime: stopper, Recorder: logRecorder{rec}, EventOnly: true}
		if err := k.Kill(context.Background(), pod, container, "containerd://abc", probespec.Startup, nil); err != nil {
			t.Fatal(err)
		}
		if ev := rec.list(); len(ev) != 1 || !strings.HasSuffix(ev[0], "Container app failed startup probe, will be restarted") {
			t.Errorf("events = %q", ev)
		}
		if stopper.calls != 0 {
			t.Error("EventOnly stopped the container")
		}
	})
	t.Run("runtime error", func(t *testing.T) {
		stopper := &fakeStopper{err: errors.New("rpc unavailable")}
		k := &RuntimeKiller{Runtime: stopper}
		err := k.Kill(context.Background(), pod, container, "containerd://abc", probespec.Liveness, nil)
		if err == nil || !errors.Is(err, stopper.err) {
			t.Errorf("err = %v, want it to wrap the runtime's", err)
		}
		if stopper.grace != 60*time.Second {
			t.Errorf("grace = %v, want the pod's 60s", stopper.grace)
		}
	})
	t.Run("no runtime", func(t *testing.T) {
		k := &RuntimeKiller{}
		if err := k.Kill(context.Background(), pod, container, "containerd://abc", probespec.Liveness, nil); err == nil {
			t.Error("no error without a runtime")
		}
	})
}
