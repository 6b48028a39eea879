package status

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The condition types probed owns (contract §2). Nothing else is ever written
// in conditions mode.
const (
	// PodReadyCondition is True when every ready.probed.io/* and
	// started.probed.io/* condition of the pod is True. Pods list it in
	// spec.readinessGates.
	PodReadyCondition v1.PodConditionType = "probed.io/ready"

	readyPrefix   = "ready.probed.io/"
	startedPrefix = "started.probed.io/"
)

// ReadyConditionType is the type of a container's readiness condition.
func ReadyConditionType(container string) v1.PodConditionType {
	return v1.PodConditionType(readyPrefix + container)
}

// StartedConditionType is the type of a container's startup condition.
func StartedConditionType(container string) v1.PodConditionType {
	return v1.PodConditionType(startedPrefix + container)
}

// IsOwnedConditionType reports whether probed owns conditions of type t.
func IsOwnedConditionType(t v1.PodConditionType) bool {
	s := string(t)
	return t == PodReadyCondition ||
		(strings.HasPrefix(s, readyPrefix) && len(s) > len(readyPrefix)) ||
		(strings.HasPrefix(s, startedPrefix) && len(s) > len(startedPrefix))
}

// OwnedConditions returns the conditions in conds that probed owns, in order.
func OwnedConditions(conds []v1.PodCondition) []v1.PodCondition {
	var out []v1.PodCondition
	for _, c := range conds {
		if IsOwnedConditionType(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// Conditions returns exactly the conditions probed owns for a pod in state s:
// started.probed.io/<c> then ready.probed.io/<c> for each container that has
// such a probe, in s's order, then probed.io/ready. An empty PodState has no
// conditions.
//
// A condition keeps the lastTransitionTime of the condition of the same type
// in current when its status is unchanged; otherwise it gets now. current is
// the pod's conditions as last known (probed's own last write, or the pod from
// the informer cache); conditions of other types in it are ignored.
func Conditions(s PodState, current []v1.PodCondition, now metav1.Time) []v1.PodCondition {
	if len(s.Containers) == 0 {
		return nil
	}
	out := make([]v1.PodCondition, 0, 2*len(s.Containers)+1)
	var notStarted, notReady []string
	gating := 0
	add := func(t v1.PodConditionType, ok bool, reason, message string) {
		out = append(out, v1.PodCondition{
			Type:    t,
			Status:  boolStatus(ok),
			Reason:  reason,
			Message: message,
		})
	}
	for _, c := range s.Containers {
		if c.HasStartup {
			gating++
			add(StartedConditionType(c.Name), c.Started, c.StartedReason, c.StartedMessage)
			if !c.Started {
				notStarted = append(notStarted, fmt.Sprintf("%s (%s)", c.Name, c.StartedReason))
			}
		}
		if c.HasReadiness {
			gating++
			add(ReadyConditionType(c.Name), c.Ready, c.ReadyReason, c.ReadyMessage)
			if !c.Ready {
				notReady = append(notReady, fmt.Sprintf("%s (%s)", c.Name, c.ReadyReason))
			}
		}
	}

	switch {
	case len(notStarted)+len(notReady) > 0:
		var parts []string
		if len(notStarted) > 0 {
			parts = append(parts, "not started: "+strings.Join(notStarted, ", "))
		}
		if len(notReady) > 0 {
			parts = append(parts, "not ready: "+strings.Join(notReady, ", "))
		}
		add(PodReadyCondition, false, ReasonContainersNotReady, TruncateMessage(strings.Join(parts, "; ")))
	case gating == 0:
		add(PodReadyCondition, true, ReasonNoGatingProbes, "the pod has no probed readiness or startup probe")
	default:
		add(PodReadyCondition, true, ReasonAllProbesSucceeded, "")
	}

	for i := range out {
		out[i].LastTransitionTime = now
		if prev := findCondition(current, out[i].Type); prev != nil &&
			prev.Status == out[i].Status && !prev.LastTransitionTime.IsZero() {
			out[i].LastTransitionTime = prev.LastTransitionTime
		}
	}
	return out
}

func boolStatus(b bool) v1.ConditionStatus {
	if b {
		return v1.ConditionTrue
	}
	return v1.ConditionFalse
}

// findCondition returns the first condition of type t, or nil.
func findCondition(conds []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// sameConditions reports whether a and b hold the same condition types with
// the same status, reason and observedGeneration. Messages, times and
// order do not count.
func sameConditions(a, b []v1.PodCondition) bool {
	return len(a) == len(b) && covers(a, b) && covers(b, a)
}

// covers reports whether every condition in a has a match in b.
func covers(a, b []v1.PodCondition) bool {
	for _, x := range a {
		y := findCondition(b, x.Type)
		if y == nil || y.Status != x.Status || y.Reason != x.Reason || y.ObservedGeneration != x.ObservedGeneration {
			return false
		}
	}
	return true
}
