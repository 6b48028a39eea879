package status

import (
	v1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// applyConfiguration is the server-side apply request of conditions mode:
// exactly probed's conditions for the pod, nothing else.
//
// PodStatus.conditions is a map list keyed by type (+listType=map,
// +listMapKey=type), so the API server merges the applied conditions one by
// one: conditions of other managers are kept, and a condition probed applied
// before but omits now is removed. The UID is a precondition: the request
// fails instead of writing to a new pod that reuses the name.
func applyConfiguration(key PodKey, conds []v1.PodCondition) *corev1ac.PodApplyConfiguration {
	status := corev1ac.PodStatus()
	for _, c := range conds {
		ac := corev1ac.PodCondition().
			WithType(c.Type).
			WithStatus(c.Status).
			WithLastTransitionTime(c.LastTransitionTime)
		if c.Reason != "" {
			ac.WithReason(c.Reason)
		}
		if c.Message != "" {
			ac.WithMessage(c.Message)
		}
		status.WithConditions(ac)
	}
	pod := corev1ac.Pod(key.Name, key.Namespace).WithStatus(status)
	if key.UID != "" {
		pod.WithUID(key.UID)
	}
	return pod
}
