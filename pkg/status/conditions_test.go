package status

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	tOld = metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	tNow = metav1.NewTime(time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC))
)

func ready(name string, ok bool, reason string) ContainerState {
	return ContainerState{Name: name, Started: true, HasReadiness: true, Ready: ok, ReadyReason: reason}
}

func started(name string, ok bool, reason string) ContainerState {
	return ContainerState{Name: name, HasStartup: true, Started: ok, StartedReason: reason, Ready: ok}
}

type condSummary struct {
	Type   v1.PodConditionType
	Status v1.ConditionStatus
	Reason string
}

func summaries(conds []v1.PodCondition) []condSummary {
	var out []condSummary
	for _, c := range conds {
		out = append(out, condSummary{c.Type, c.Status, c.Reason})
	}
	return out
}

func TestConditionsAggregate(t *testing.T) {
	both := ContainerState{Name: "c", HasStartup: true, Started: true, StartedReason: ReasonProbeSucceeded,
		HasReadiness: true, Ready: true, ReadyReason: ReasonProbeSucceeded}
	tests := []struct {
		name    string
		state   PodState
		want    []condSummary
		message string
	}{{
		name:  "no probed probe: no condition at all",
		state: PodState{},
	}, {
		name:  "liveness only: probed.io/ready True",
		state: PodState{Containers: []ContainerState{{Name: "c", Started: true, Ready: true}}},
		want:  []condSummary{{PodReadyCondition, v1.ConditionTrue, ReasonNoGatingProbes}},
	}, {
		name:  "liveness only, container down: still True, liveness gates nothing",
		state: PodState{Containers: []ContainerState{{Name: "c"}}},
		want:  []condSummary{{PodReadyCondition, v1.ConditionTrue, ReasonNoGatingProbes}},
	}, {
		name:  "all ready",
		state: PodState{Containers: []ContainerState{both, ready("d", true, ReasonProbeSucceeded)}},
		want: []condSummary{
			{"started.probed.io/c", v1.ConditionTrue, ReasonProbeSucceeded},
			{"ready.probed.io/c", v1.ConditionTrue, ReasonProbeSucceeded},
			{"ready.probed.io/d", v1.ConditionTrue, ReasonProbeSucceeded},
			{PodReadyCondition, v1.ConditionTrue, ReasonAllProbesSucceeded},
		},
	}, {
		name:  "one not ready",
		state: PodState{Containers: []ContainerState{ready("a", true, ReasonProbeSucceeded), ready("b", false, ReasonProbeFailed)}},
		want: []condSummary{
			{"ready.probed.io/a", v1.ConditionTrue, ReasonProbeSucceeded},
			{"ready.probed.io/b", v1.ConditionFalse, ReasonProbeFailed},
			{PodReadyCondition, v1.ConditionFalse, ReasonContainersNotReady},
		},
		message: "not ready: b (ProbeFailed)",
	}, {
		name:  "startup only, not started",
		state: PodState{Containers: []ContainerState{started("s", false, ReasonProbePending), {Name: "l", Started: true, Ready: true}}},
		want: []condSummary{
			{"started.probed.io/s", v1.ConditionFalse, ReasonProbePending},
			{PodReadyCondition, v1.ConditionFalse, ReasonContainersNotReady},
		},
		message: "not started: s (ProbePending)",
	}, {
		name: "not started and not ready",
		state: PodState{Containers: []ContainerState{{Name: "c", HasStartup: true, StartedReason: ReasonProbeFailed,
			HasReadiness: true, ReadyReason: ReasonWaitingForStartup}}},
		want: []condSummary{
			{"started.probed.io/c", v1.ConditionFalse, ReasonProbeFailed},
			{"ready.probed.io/c", v1.ConditionFalse, ReasonWaitingForStartup},
			{PodReadyCondition, v1.ConditionFalse, ReasonContainersNotReady},
		},
		message: "not started: c (ProbeFailed); not ready: c (WaitingForStartup)",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Conditions(tc.state, nil, tNow)
			if !slices.Equal(summaries(got), tc.want) {
				t.Fatalf("Conditions:\n got %v\nwant %v", summaries(got), tc.want)
			}
			for _, c := range got {
				if !IsOwnedConditionType(c.Type) {
					t.Errorf("condition %q is not owned by probed", c.Type)
				}
				if !c.LastTransitionTime.Equal(&tNow) {
					t.Errorf("%s: lastTransitionTime %v, want now", c.Type, c.LastTransitionTime)
				}
			}
			if tc.message != "" && got[len(got)-1].Message != tc.message {
				t.Errorf("aggregate message %q, want %q", got[len(got)-1].Message, tc.message)
			}
		})
	}
}

func TestConditionsAggregateMessageIsCapped(t *testing.T) {
	var cs []ContainerState
	for i := 0; i < 100; i++ {
		cs = append(cs, ready(strings.Repeat("n", 40)+string(rune('a'+i%26)), false, ReasonProbeFailed))
	}
	got := Conditions(PodState{Containers: cs}, nil, tNow)
	if msg := got[len(got)-1].Message; len(msg) > MaxMessageBytes {
		t.Errorf("aggregate message is %d bytes", len(msg))
	}
}

func TestConditionsLastTransitionTime(t *testing.T) {
	current := []v1.PodCondition{
		{Type: "ready.probed.io/a", Status: v1.ConditionTrue, Reason: ReasonProbeSucceeded, LastTransitionTime: tOld},
		{Type: "ready.probed.io/b", Status: v1.ConditionTrue, Reason: ReasonProbeSucceeded, LastTransitionTime: tOld},
		{Type: "ready.probed.io/c", Status: v1.ConditionFalse, Reason: ReasonProbeFailed}, // no time
		{Type: PodReadyCondition, Status: v1.ConditionTrue, Reason: ReasonAllProbesSucceeded, LastTransitionTime: tOld},
	}
	state := PodState{Containers: []ContainerState{
		ready("a", true, ReasonProbeSucceeded),       // unchanged: keep
		ready("b", false, ReasonProbeFailed),         // status changed: now
		ready("c", false, ReasonContainerNotRunning), // reason changed only, but no old time: now
		ready("d", false, ReasonProbePending),        // new: now
	}}
	got := Conditions(state, current, tNow)
	want := map[v1.PodConditionType]metav1.Time{
		"ready.probed.io/a": tOld,
		"ready.probed.io/b": tNow,
		"ready.probed.io/c": tNow,
		"ready.probed.io/d": tNow,
		PodReadyCondition:   tNow, // True -> False
	}
	for _, c := range got {
		w := want[c.Type]
		if !c.LastTransitionTime.Equal(&w) {
			t.Errorf("%s: lastTransitionTime %v, want %v", c.Type, c.LastTransitionTime, w)
		}
	}

	// A reason-only change keeps the time.
	current[2].LastTransitionTime = tOld
	got = Conditions(state, current, tNow)
	if c := findCondition(got, "ready.probed.io/c"); !c.LastTransitionTime.Equal(&tOld) {
		t.Errorf("reason-only change moved lastTransitionTime to %v", c.LastTransitionTime)
	}
}

func TestConditionTypes(t *testing.T) {
	if got := ReadyConditionType("app"); got != "ready.probed.io/app" {
		t.Errorf("ReadyConditionType = %q", got)
	}
	if got := StartedConditionType("app"); got != "started.probed.io/app" {
		t.Errorf("StartedConditionType = %q", got)
	}
	for typ, want := range map[v1.PodConditionType]bool{
		"probed.io/ready":     true,
		"ready.probed.io/a":   true,
		"started.probed.io/a": true,
		"ready.probed.io/":    false,
		"started.probed.io/":  false,
		"Ready":               false,
		"ContainersReady":     false,
		"probed.io/other":     false,
		"example.com/gate":    false,
		"xready.probed.io/a":  false,
	} {
		if got := IsOwnedConditionType(typ); got != want {
			t.Errorf("IsOwnedConditionType(%q) = %t, want %t", typ, got, want)
		}
	}
	conds := []v1.PodCondition{{Type: "Ready"}, {Type: "ready.probed.io/a"}, {Type: "example.com/x"}, {Type: PodReadyCondition}}
	if got := OwnedConditions(conds); len(got) != 2 || got[0].Type != "ready.probed.io/a" || got[1].Type != PodReadyCondition {
		t.Errorf("OwnedConditions = %v", got)
	}
}

func TestSameConditions(t *testing.T) {
	a := []v1.PodCondition{{Type: "x", Status: v1.ConditionTrue, Reason: "R", Message: "m1", LastTransitionTime: tOld}, {Type: "y", Status: v1.ConditionFalse}}
	b := []v1.PodCondition{{Type: "y", Status: v1.ConditionFalse, Message: "other"}, {Type: "x", Status: v1.ConditionTrue, Reason: "R", LastTransitionTime: tNow}}
	if !sameConditions(a, b) {
		t.Error("order, message and time should not count")
	}
	if sameConditions(a, []v1.PodCondition{a[0], a[0]}) || sameConditions([]v1.PodCondition{a[0], a[0]}, a) {
		t.Error("duplicates confused the comparison")
	}
	if sameConditions(a, a[:1]) {
		t.Error("missing condition not noticed")
	}
	c := []v1.PodCondition{a[0], {Type: "y", Status: v1.ConditionFalse, Reason: "Other"}}
	if sameConditions(a, c) {
		t.Error("reason change not noticed")
	}
}
