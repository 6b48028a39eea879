package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSeeds(t *testing.T) {
	ltt := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	before := metav1.NewTime(ltt.Add(-time.Minute))
	after := metav1.NewTime(ltt.Add(time.Second))
	runningSince := func(name, id string, at metav1.Time) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, ContainerID: id, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: at}}}
	}
	cond := func(typ string, status v1.ConditionStatus, at metav1.Time) v1.PodCondition {
		return v1.PodCondition{Type: v1.PodConditionType(typ), Status: status, LastTransitionTime: at}
	}
	yes := func(s Seed) bool { return s.Ready != nil && *s.Ready }
	started := func(s Seed) bool { return s.Started != nil && *s.Started }

	type want struct {
		id             string
		ready, started bool
	}
	tests := []struct {
		name  string
		pod   *v1.Pod
		wants map[string]want
	}{{
		name:  "nil pod",
		wants: map[string]want{},
	}, {
		name: "ready and started, container not restarted",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions: []v1.PodCondition{
				cond("ready.probed.io/app", v1.ConditionTrue, ltt),
				cond("started.probed.io/app", v1.ConditionTrue, ltt),
				cond("probed.io/ready", v1.ConditionTrue, ltt),
				cond("Ready", v1.ConditionTrue, ltt),
			},
			ContainerStatuses: []v1.ContainerStatus{runningSince("app", "c://1", before)},
		}},
		wants: map[string]want{"app": {"c://1", true, true}},
	}, {
		name: "started in the same second as the transition counts",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions:        []v1.PodCondition{cond("ready.probed.io/app", v1.ConditionTrue, ltt)},
			ContainerStatuses: []v1.ContainerStatus{runningSince("app", "c://1", ltt)},
		}},
		wants: map[string]want{"app": {"c://1", true, false}},
	}, {
		name: "restarted after the transition",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions:        []v1.PodCondition{cond("ready.probed.io/app", v1.ConditionTrue, ltt)},
			ContainerStatuses: []v1.ContainerStatus{runningSince("app", "c://2", after)},
		}},
		wants: map[string]want{},
	}, {
		name: "previous instance finished in the same second: ambiguous",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions: []v1.PodCondition{cond("ready.probed.io/app", v1.ConditionTrue, ltt)},
			ContainerStatuses: []v1.ContainerStatus{func() v1.ContainerStatus {
				cs := runningSince("app", "c://2", ltt)
				cs.LastTerminationState.Terminated = &v1.ContainerStateTerminated{FinishedAt: ltt}
				return cs
			}()},
		}},
		wants: map[string]want{},
	}, {
		name: "previous instance finished well before",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions: []v1.PodCondition{cond("ready.probed.io/app", v1.ConditionTrue, ltt)},
			ContainerStatuses: []v1.ContainerStatus{func() v1.ContainerStatus {
				cs := runningSince("app", "c://2", before)
				cs.LastTerminationState.Terminated = &v1.ContainerStateTerminated{FinishedAt: before}
				return cs
			}()},
		}},
		wants: map[string]want{"app": {"c://2", true, false}},
	}, {
		name: "False conditions give no seed",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions: []v1.PodCondition{
				cond("ready.probed.io/app", v1.ConditionFalse, ltt),
				cond("started.probed.io/app", v1.ConditionUnknown, ltt),
			},
			ContainerStatuses: []v1.ContainerStatus{runningSince("app", "c://1", before)},
		}},
		wants: map[string]want{},
	}, {
		name: "missing container status",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions: []v1.PodCondition{cond("ready.probed.io/app", v1.ConditionTrue, ltt)},
		}},
		wants: map[string]want{},
	}, {
		name: "container not running",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions: []v1.PodCondition{cond("ready.probed.io/app", v1.ConditionTrue, ltt)},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", ContainerID: "c://1",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}}},
		}},
		wants: map[string]want{},
	}, {
		name: "no container ID or startedAt",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions: []v1.PodCondition{
				cond("ready.probed.io/a", v1.ConditionTrue, ltt),
				cond("ready.probed.io/b", v1.ConditionTrue, ltt),
			},
			ContainerStatuses: []v1.ContainerStatus{
				runningSince("a", "", before),
				runningSince("b", "c://b", metav1.Time{}),
			},
		}},
		wants: map[string]want{},
	}, {
		name: "condition without lastTransitionTime",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions:        []v1.PodCondition{cond("ready.probed.io/app", v1.ConditionTrue, metav1.Time{})},
			ContainerStatuses: []v1.ContainerStatus{runningSince("app", "c://1", before)},
		}},
		wants: map[string]want{},
	}, {
		name: "terminal pod",
		pod: &v1.Pod{Status: v1.PodStatus{
			Phase:             v1.PodSucceeded,
			Conditions:        []v1.PodCondition{cond("ready.probed.io/app", v1.ConditionTrue, ltt)},
			ContainerStatuses: []v1.ContainerStatus{runningSince("app", "c://1", before)},
		}},
		wants: map[string]want{},
	}, {
		name: "sidecar from init container statuses; malformed and duplicate types",
		pod: &v1.Pod{Status: v1.PodStatus{
			Conditions: []v1.PodCondition{
				cond("started.probed.io/proxy", v1.ConditionTrue, ltt),
				cond("started.probed.io/proxy", v1.ConditionFalse, ltt), // duplicate: first wins
				cond("ready.probed.io/", v1.ConditionTrue, ltt),
			},
			InitContainerStatuses: []v1.ContainerStatus{runningSince("proxy", "c://p", before)},
		}},
		wants: map[string]want{"proxy": {"c://p", false, true}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Seeds(tc.pod)
			if len(got) != len(tc.wants) {
				t.Fatalf("Seeds = %+v, want %d entries", got, len(tc.wants))
			}
			for name, w := range tc.wants {
				s, ok := got[name]
				if !ok {
					t.Fatalf("no seed for %q", name)
				}
				if s.ContainerID != w.id || yes(s) != w.ready || started(s) != w.started {
					t.Errorf("seed %q = {id %q ready %t started %t}, want %+v", name, s.ContainerID, yes(s), started(s), w)
				}
				if !w.ready && s.Ready != nil || !w.started && s.Started != nil {
					t.Errorf("seed %q sets a field it should leave nil: %+v", name, s)
				}
			}
		})
	}
}

// In container-status mode the results probed had established are the
// pod's own ready/started, valid for the container ID they came with.
func TestSeedsFromContainerStatuses(t *testing.T) {
	yes, no := true, false
	run := v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}
	pod := &v1.Pod{Status: v1.PodStatus{Phase: v1.PodRunning,
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "ready", ContainerID: "containerd://a", Ready: true, Started: &yes, State: run},
			{Name: "started-only", ContainerID: "containerd://b", Started: &yes, State: run},
			{Name: "neither", ContainerID: "containerd://c", Started: &no, State: run},
			{Name: "not-running", ContainerID: "containerd://d", Ready: true, Started: &yes,
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}},
			{Name: "no-id", Ready: true, Started: &yes, State: run},
		},
		InitContainerStatuses: []v1.ContainerStatus{
			{Name: "sidecar", ContainerID: "containerd://e", Ready: true, Started: &yes, State: run},
		},
	}}
	got := SeedsFromContainerStatuses(pod)
	want := map[string]Seed{
		"ready":        {ContainerID: "containerd://a", Ready: &yes, Started: &yes},
		"started-only": {ContainerID: "containerd://b", Started: &yes},
		"sidecar":      {ContainerID: "containerd://e", Ready: &yes, Started: &yes},
	}
	if len(got) != len(want) {
		t.Fatalf("seeds = %+v; want %d containers", got, len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok || g.ContainerID != w.ContainerID || (g.Ready != nil) != (w.Ready != nil) || (g.Started != nil) != (w.Started != nil) {
			t.Errorf("%s: seed %+v; want %+v", name, g, w)
		}
	}
	pod.Status.Phase = v1.PodSucceeded
	if got := SeedsFromContainerStatuses(pod); len(got) != 0 {
		t.Errorf("terminal pod seeded: %+v", got)
	}
	if SeedsFor(ModeContainerStatus)(nil) == nil || len(SeedsFor(ModeConditions)(pod)) != 0 {
		t.Error("SeedsFor picks the wrong reader")
	}
}
