package status

import (
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/probed-dev/probed/pkg/containerstatus"
)

// kubeletUnknownContainerStatuses is the kubelet's reason when a pod has no
// container status at all.
const kubeletUnknownContainerStatuses = "UnknownContainerStatuses"

// containerFlags is what container-status mode sets on one container status.
type containerFlags struct{ ready, started bool }

// setContainerStatus applies s to pod, which the caller owns (a copy):
// containerStatuses[].ready and .started of s's containers that have a
// status, then ContainersReady and Ready recomputed by the kubelet's rules,
// with the pod's generation as their observedGeneration, as the kubelet
// sets it on the conditions it owns (status/generate.go). It reports
// whether any ready/started value, or the status, reason or
// observedGeneration of either condition, changed; message-only changes
// are applied but not reported.
func setContainerStatus(pod *v1.Pod, s PodState, now metav1.Time) bool {
	changed := false
	for _, c := range s.Containers {
		cs := containerstatus.Find(pod, c.Name)
		if cs == nil {
			continue // not created yet: there is nothing to mark
		}
		if cs.Ready != c.Ready {
			cs.Ready = c.Ready
			changed = true
		}
		if cs.Started == nil || *cs.Started != c.Started {
			started := c.Started
			cs.Started = &started
			changed = true
		}
	}
	containersReady := containersReadyCondition(pod)
	ready := podReadyCondition(pod, containersReady)
	containersReady.ObservedGeneration, ready.ObservedGeneration = pod.Generation, pod.Generation
	changed = setPodCondition(pod, containersReady, now) || changed
	changed = setPodCondition(pod, ready, now) || changed
	return changed
}

// flagsOf returns the ready/started values of s's containers that have a
// status in pod.
func flagsOf(pod *v1.Pod, s PodState) map[string]containerFlags {
	out := map[string]containerFlags{}
	for _, c := range s.Containers {
		if cs := containerstatus.Find(pod, c.Name); cs != nil {
			out[c.Name] = containerFlags{ready: cs.Ready, started: cs.Started != nil && *cs.Started}
		}
	}
	return out
}

// kubeletConditions returns pod's ContainersReady and Ready conditions.
func kubeletConditions(pod *v1.Pod) []v1.PodCondition {
	var out []v1.PodCondition
	for _, t := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		if c := findCondition(pod.Status.Conditions, t); c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// setPodCondition puts c into pod's conditions, keeping lastTransitionTime
// when the status is unchanged. It reports whether the status, reason or
// observedGeneration changed, or the condition is new.
func setPodCondition(pod *v1.Pod, c v1.PodCondition, now metav1.Time) bool {
	prev := findCondition(pod.Status.Conditions, c.Type)
	if prev == nil {
		c.LastTransitionTime = now
		pod.Status.Conditions = append(pod.Status.Conditions, c)
		return true
	}
	changed := prev.Status != c.Status || prev.Reason != c.Reason || prev.ObservedGeneration != c.ObservedGeneration
	if prev.Status != c.Status || prev.LastTransitionTime.IsZero() {
		prev.LastTransitionTime = now
	}
	prev.Status, prev.Reason, prev.Message, prev.ObservedGeneration = c.Status, c.Reason, c.Message, c.ObservedGeneration
	return changed
}

// containersReadyCondition computes ContainersReady as the kubelet does:
// True when every regular container and every restartable init container
// (sidecar) has a status and is ready.
func containersReadyCondition(pod *v1.Pod) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse}
	if len(pod.Status.ContainerStatuses) == 0 && len(pod.Status.InitContainerStatuses) == 0 {
		cond.Reason = kubeletUnknownContainerStatuses
		return cond
	}
	var unknown, unready []string
	check := func(name string) {
		cs := containerstatus.Find(pod, name)
		switch {
		case cs == nil:
			unknown = append(unknown, name)
		case !cs.Ready:
			unready = append(unready, name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			check(c.Name)
		}
	}
	for i := range pod.Spec.Containers {
		check(pod.Spec.Containers[i].Name)
	}

	switch {
	case pod.Status.Phase == v1.PodSucceeded && len(unknown) == 0:
		cond.Reason = kubeletPodCompleted
		return cond
	case pod.Status.Phase == v1.PodFailed:
		cond.Reason = kubeletPodFailed
		return cond
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unready status: %s", unready))
	}
	if len(msgs) > 0 {
		cond.Reason = kubeletContainersNotReady
		cond.Message = strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = v1.ConditionTrue
	return cond
}

// podReadyCondition computes Ready as the kubelet does: ContainersReady, and
// every readiness gate's condition True.
func podReadyCondition(pod *v1.Pod, containersReady v1.PodCondition) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.PodReady}
	if containersReady.Status != v1.ConditionTrue {
		cond.Status, cond.Reason, cond.Message = containersReady.Status, containersReady.Reason, containersReady.Message
		return cond
	}
	var msgs []string
	for _, gate := range pod.Spec.ReadinessGates {
		c := findCondition(pod.Status.Conditions, gate.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(gate.ConditionType)))
		case c.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(gate.ConditionType), c.Status))
		}
	}
	if len(msgs) > 0 {
		cond.Status, cond.Reason, cond.Message = v1.ConditionFalse, kubeletReadinessGatesNotReady, strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = v1.ConditionTrue
	return cond
}

// statusPatch returns a strategic merge patch from old to updated (the same
// pod, status changed) that carries old's resourceVersion, so that the API
// server rejects it with a Conflict if anyone wrote the pod since it was read
// (optimistic concurrency with only the "patch" verb, contract §7).
//
// containerStatuses and initContainerStatuses are atomic lists, so a patch
// sends them whole; conditions merge by type, so only the changed ones are
// sent. The resourceVersion precondition makes both safe.
func statusPatch(old, updated *v1.Pod) ([]byte, error) {
	oldJSON, err := json.Marshal(v1.Pod{Status: old.Status})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(v1.Pod{Status: updated.Status})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	meta := map[string]any{"uid": string(old.UID)}
	if old.ResourceVersion != "" {
		meta["resourceVersion"] = old.ResourceVersion
	}
	m["metadata"] = meta
	return json.Marshal(m)
}
