package kill

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Issue 31, 4: a Job's pod (restartPolicy Never) whose only app container
// fails its liveness probe, beside a sidecar. The kubelet's own kill would
// have been a kill of the pod (computePodActions' KillPod): the event
// "Stopping container app" and the pod's grace period of 30 s, not the
// probe's 1 s, so an app that traps SIGTERM exits as it chooses (0 or
// 143) rather than 137, which a podFailurePolicy's onExitCodes reads. With
// another app container running, it is a container's kill, as before: the
// probe's text and grace period (at least 2 s).
func TestKillOfThePodsLastContainer(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	job := func(others ...v1.ContainerStatus) *v1.Pod {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "u"},
			Spec: v1.PodSpec{
				RestartPolicy:                 v1.RestartPolicyNever,
				TerminationGracePeriodSeconds: i64(30),
				InitContainers:                []v1.Container{{Name: "proxy", RestartPolicy: &always}},
				Containers:                    []v1.Container{{Name: "app"}},
			},
			Status: v1.PodStatus{
				InitContainerStatuses: []v1.ContainerStatus{{Name: "proxy", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}},
				ContainerStatuses:     []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}},
			},
		}
		for _, o := range others {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: o.Name})
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, o)
		}
		return p
	}
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	done := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	probe := &v1.Probe{TerminationGracePeriodSeconds: i64(1)}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{"the last app container", job(), []string{
			"event app Normal Killing: Stopping container app", "stop containerd://abc 30s"}},
		{"the other app container has ended", job(v1.ContainerStatus{Name: "report", State: done}), []string{
			"event app Normal Killing: Stopping container app", "stop containerd://abc 30s"}},
		{"another app container runs", job(v1.ContainerStatus{Name: "report", State: running}), []string{
			"event app Normal Killing: Container app failed liveness probe", "stop containerd://abc 2s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &killLog{}
			k := &RuntimeKiller{Runtime: logStopper{log}, Recorder: logRecorder{log}}
			if err := k.Kill(context.Background(), tc.pod, &v1.Container{Name: "app"}, "containerd://abc", probespec.Liveness, probe); err != nil {
				t.Fatal(err)
			}
			checkSteps(t, log, tc.want...)
		})
	}
}
