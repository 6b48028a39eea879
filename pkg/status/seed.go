package status

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/containerstatus"
)

// Seed is what probed had established about one container before probed
// itself restarted. A nil field means "nothing established": start from the
// probe's usual initial result.
type Seed struct {
	// ContainerID is the container instance the seed is valid for. Use the
	// seed only for a worker whose first container ID is this one.
	ContainerID string
	// Ready is true when ready.probed.io/<c> is True for this instance.
	Ready *bool
	// Started is true when started.probed.io/<c> is True for this instance.
	Started *bool
}

// Seeds reads back, from a pod as the API server has it, the results probed
// had established before it restarted, so that a restart of probed does not
// flip any condition of a container that did not restart (contract §2). The
// worker starts from a seed instead of its usual initial result.
//
// A container is seeded from its ready.probed.io/<c> or started.probed.io/<c>
// condition when all of these hold:
//   - the condition is True and has a lastTransitionTime;
//   - the container has a status (regular or init container) that is running,
//     with a container ID and a startedAt;
//   - startedAt ≤ lastTransitionTime: the current instance was already
//     running when the condition turned True, so the True was earned by this
//     instance. Both times come from the same node clock (probed writes the
//     condition on the node the runtime runs on), at one-second precision.
//
// Edge cases, all resolved towards "no seed" (the probe then re-proves the
// result, which may flip the condition once, but never claims a result a
// container has not earned):
//   - a False condition gives no seed: the usual initial result is not
//     better than nothing, and False stays False until the probe says True;
//   - the container restarted after the transition (startedAt later);
//   - the previous instance finished in the same second as the transition
//     (lastState.terminated.finishedAt ≥ lastTransitionTime): with
//     one-second precision it cannot be told whether the True belonged to the
//     old or the new instance;
//   - the container is waiting or terminated, or has no status;
//   - the pod has reached a terminal phase (Succeeded or Failed);
//   - a condition with a malformed type (no container name) is ignored; when
//     a type appears twice, the first one counts.
//
// The result is keyed by container name and lists only seeded containers.
// Seeds is a pure function of the pod.
func Seeds(pod *v1.Pod) map[string]Seed {
	out := map[string]Seed{}
	if pod == nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return out
	}
	seen := map[v1.PodConditionType]bool{}
	for i := range pod.Status.Conditions {
		cond := &pod.Status.Conditions[i]
		if seen[cond.Type] {
			continue
		}
		seen[cond.Type] = true

		name, ready, ok := parseContainerCondition(cond.Type)
		if !ok || cond.Status != v1.ConditionTrue || cond.LastTransitionTime.IsZero() {
			continue
		}
		cs := containerstatus.Find(pod, name)
		if cs == nil || cs.ContainerID == "" || cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() {
			continue
		}
		ltt := cond.LastTransitionTime.Time
		if cs.State.Running.StartedAt.Time.After(ltt) {
			continue // restarted (or first started) after the transition
		}
		if t := cs.LastTerminationState.Terminated; t != nil && !t.FinishedAt.IsZero() && !t.FinishedAt.Time.Before(ltt) {
			continue // ambiguous within one second
		}
		s := out[name]
		s.ContainerID = cs.ContainerID
		t := true
		if ready {
			s.Ready = &t
		} else {
			s.Started = &t
		}
		out[name] = s
	}
	return out
}

// parseContainerCondition splits ready.probed.io/<c> and
// started.probed.io/<c>; ready tells which.
func parseContainerCondition(t v1.PodConditionType) (container string, ready, ok bool) {
	s := string(t)
	if c, found := strings.CutPrefix(s, readyPrefix); found && c != "" {
		return c, true, true
	}
	if c, found := strings.CutPrefix(s, startedPrefix); found && c != "" {
		return c, false, true
	}
	return "", false, false
}

// SeedsFromContainerStatuses is Seeds for container-status mode, where
// probed's results live in containerStatuses[].ready and .started, not in
// conditions of its own: a running container with a container ID is seeded
// Ready where its ready is true and Started where its started is true. The
// container ID comes with the values, so a seed holds only for the instance
// the node's status reported them for; a restarted container (a new ID)
// starts from the usual initial result.
//
// This is what a kubelet 1.35+ writes after its own restart (KEP-4781:
// started kept for a running container; ready kept until a probe says
// otherwise), but for two cases the kubelet resolves towards a flip and
// contract §2 forbids: the kubelet keeps a container with a readiness probe
// ready only while the whole pod is Ready, and treats a container that
// started within 10 s before its restart as new.
func SeedsFromContainerStatuses(pod *v1.Pod) map[string]Seed {
	out := map[string]Seed{}
	if pod == nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return out
	}
	t := true
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			cs := &list[i]
			if cs.ContainerID == "" || cs.State.Running == nil {
				continue
			}
			s := Seed{ContainerID: cs.ContainerID}
			if cs.Ready {
				s.Ready = &t
			}
			if cs.Started != nil && *cs.Started {
				s.Started = &t
			}
			if s.Ready != nil || s.Started != nil {
				out[cs.Name] = s
			}
		}
	}
	return out
}

// SeedsFor returns the seed reader of a status mode.
func SeedsFor(m Mode) func(*v1.Pod) map[string]Seed {
	if m == ModeContainerStatus {
		return SeedsFromContainerStatuses
	}
	return Seeds
}
