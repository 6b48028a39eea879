package status

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/containerstatus"
)

func ptrTo[T any](v T) *T { return &v }

func csPod() *v1.Pod {
	return &v1.Pod{
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{
				{Name: "setup"}, // a regular init container does not count
				{Name: "proxy", RestartPolicy: ptrTo(v1.ContainerRestartPolicyAlways)},
			},
			Containers: []v1.Container{{Name: "app"}, {Name: "db"}},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning,
			InitContainerStatuses: []v1.ContainerStatus{
				{Name: "setup", Ready: false},
				{Name: "proxy", Ready: true},
			},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true}, {Name: "db", Ready: true}},
		},
	}
}

func TestKubeletReadinessRules(t *testing.T) {
	tests := []struct {
		name            string
		mutate          func(*v1.Pod)
		containersReady condSummary
		ready           condSummary
		message         string
	}{{
		name:            "all ready",
		mutate:          func(*v1.Pod) {},
		containersReady: condSummary{v1.ContainersReady, v1.ConditionTrue, ""},
		ready:           condSummary{v1.PodReady, v1.ConditionTrue, ""},
	}, {
		name:            "no statuses at all",
		mutate:          func(p *v1.Pod) { p.Status.ContainerStatuses, p.Status.InitContainerStatuses = nil, nil },
		containersReady: condSummary{v1.ContainersReady, v1.ConditionFalse, kubeletUnknownContainerStatuses},
		ready:           condSummary{v1.PodReady, v1.ConditionFalse, kubeletUnknownContainerStatuses},
	}, {
		name:            "sidecar not ready",
		mutate:          func(p *v1.Pod) { p.Status.InitContainerStatuses[1].Ready = false },
		containersReady: condSummary{v1.ContainersReady, v1.ConditionFalse, kubeletContainersNotReady},
		ready:           condSummary{v1.PodReady, v1.ConditionFalse, kubeletContainersNotReady},
		message:         "containers with unready status: [proxy]",
	}, {
		name: "unknown and unready",
		mutate: func(p *v1.Pod) {
			p.Status.ContainerStatuses = p.Status.ContainerStatuses[:1]
			p.Status.ContainerStatuses[0].Ready = false
		},
		containersReady: condSummary{v1.ContainersReady, v1.ConditionFalse, kubeletContainersNotReady},
		ready:           condSummary{v1.PodReady, v1.ConditionFalse, kubeletContainersNotReady},
		message:         "containers with unknown status: [db], containers with unready status: [app]",
	}, {
		name:            "succeeded",
		mutate:          func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded },
		containersReady: condSummary{v1.ContainersReady, v1.ConditionFalse, kubeletPodCompleted},
		ready:           condSummary{v1.PodReady, v1.ConditionFalse, kubeletPodCompleted},
	}, {
		name:            "failed",
		mutate:          func(p *v1.Pod) { p.Status.Phase = v1.PodFailed },
		containersReady: condSummary{v1.ContainersReady, v1.ConditionFalse, kubeletPodFailed},
		ready:           condSummary{v1.PodReady, v1.ConditionFalse, kubeletPodFailed},
	}, {
		name: "readiness gates: missing and False",
		mutate: func(p *v1.Pod) {
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/a"}, {ConditionType: "example.com/b"}, {ConditionType: "example.com/c"}}
			p.Status.Conditions = []v1.PodCondition{
				{Type: "example.com/b", Status: v1.ConditionFalse},
				{Type: "example.com/c", Status: v1.ConditionTrue},
			}
		},
		containersReady: condSummary{v1.ContainersReady, v1.ConditionTrue, ""},
		ready:           condSummary{v1.PodReady, v1.ConditionFalse, kubeletReadinessGatesNotReady},
		message:         `corresponding condition of pod readiness gate "example.com/a" does not exist., the status of pod readiness gate "example.com/b" is not "True", but False`,
	}, {
		name: "readiness gate True",
		mutate: func(p *v1.Pod) {
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: PodReadyCondition}}
			p.Status.Conditions = []v1.PodCondition{{Type: PodReadyCondition, Status: v1.ConditionTrue}}
		},
		containersReady: condSummary{v1.ContainersReady, v1.ConditionTrue, ""},
		ready:           condSummary{v1.PodReady, v1.ConditionTrue, ""},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := csPod()
			tc.mutate(pod)
			cr := containersReadyCondition(pod)
			rd := podReadyCondition(pod, cr)
			if got := (condSummary{cr.Type, cr.Status, cr.Reason}); got != tc.containersReady {
				t.Errorf("ContainersReady = %+v, want %+v", got, tc.containersReady)
			}
			if got := (condSummary{rd.Type, rd.Status, rd.Reason}); got != tc.ready {
				t.Errorf("Ready = %+v, want %+v", got, tc.ready)
			}
			if tc.message != "" && rd.Message != tc.message {
				t.Errorf("Ready message %q, want %q", rd.Message, tc.message)
			}
		})
	}
}

func TestSetContainerStatus(t *testing.T) {
	pod := csPod()
	pod.Status.Conditions = []v1.PodCondition{
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: tOld},
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: tOld},
	}
	state := PodState{Containers: []ContainerState{
		ready("app", false, ReasonProbeFailed),
		{Name: "ghost", Ready: true, Started: true}, // no status: skipped
	}}
	if !setContainerStatus(pod, state, tNow) {
		t.Fatal("no change reported")
	}
	app := containerstatus.Find(pod, "app")
	if app.Ready || app.Started == nil || !*app.Started {
		t.Errorf("app status = ready %t started %v", app.Ready, app.Started)
	}
	for _, typ := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		c := findCondition(pod.Status.Conditions, typ)
		if c.Status != v1.ConditionFalse || !c.LastTransitionTime.Equal(&tNow) {
			t.Errorf("%s = %s at %v, want False now", typ, c.Status, c.LastTransitionTime)
		}
	}
	// Applying the same state again changes nothing.
	if setContainerStatus(pod, state, tNow) {
		t.Error("second application reported a change")
	}
	// A message-only change is applied but not reported.
	pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{Name: "late"})
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "late"})
	if setContainerStatus(pod, state, tNow) {
		t.Error("message-only change reported")
	}
	if c := findCondition(pod.Status.Conditions, v1.PodReady); c.Message != "containers with unready status: [app late]" {
		t.Errorf("message not refreshed: %q", c.Message)
	}
}

func TestStatusPatchCarriesPreconditions(t *testing.T) {
	old := csPod()
	old.UID, old.ResourceVersion = "u1", "42"
	updated := old.DeepCopy()
	updated.Status.ContainerStatuses[0].Ready = false
	patch, err := statusPatch(old, updated)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Metadata map[string]string `json:"metadata"`
		Status   struct {
			ContainerStatuses []v1.ContainerStatus `json:"containerStatuses"`
		} `json:"status"`
	}
	if err := json.Unmarshal(patch, &m); err != nil {
		t.Fatal(err)
	}
	if m.Metadata["resourceVersion"] != "42" || m.Metadata["uid"] != "u1" {
		t.Errorf("preconditions missing: %s", patch)
	}
	if len(m.Status.ContainerStatuses) != 2 {
		t.Errorf("atomic list not sent whole: %s", patch)
	}
}
