package status

import (
	"context"
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// podApply is the body of a server-side apply of a pod's status: the
// fields client-go's PodApplyConfiguration would send for the same
// conditions, in its order and with its omissions, without linking
// client-go's apply configurations (and, through them, every API group).
type podApply struct {
	Kind       string         `json:"kind"`
	APIVersion string         `json:"apiVersion"`
	Metadata   podApplyMeta   `json:"metadata"`
	Status     podApplyStatus `json:"status"`
}

type podApplyMeta struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	UID       types.UID `json:"uid,omitempty"`
}

type podApplyStatus struct {
	Conditions []conditionApply `json:"conditions,omitempty"`
}

type conditionApply struct {
	Type               v1.PodConditionType `json:"type"`
	Status             v1.ConditionStatus  `json:"status"`
	LastTransitionTime *metav1.Time        `json:"lastTransitionTime"`
	Reason             string              `json:"reason,omitempty"`
	Message            string              `json:"message,omitempty"`
}

// applyConfiguration is the server-side apply request of conditions mode:
// exactly probed's conditions for the pod, nothing else.
//
// PodStatus.conditions is a map list keyed by type (+listType=map,
// +listMapKey=type), so the API server merges the applied conditions one by
// one: conditions of other managers are kept, and a condition probed applied
// before but omits now is removed. The UID is a precondition: the request
// fails instead of writing to a new pod that reuses the name.
func applyConfiguration(key PodKey, conds []v1.PodCondition) podApply {
	pod := podApply{Kind: "Pod", APIVersion: "v1", Metadata: podApplyMeta{Name: key.Name, Namespace: key.Namespace, UID: key.UID}}
	for _, c := range conds {
		pod.Status.Conditions = append(pod.Status.Conditions, conditionApply{
			Type: c.Type, Status: c.Status, LastTransitionTime: &c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return pod
}

// applyStatus server-side applies pod's status as fieldManager, forcing
// conflicts, as the typed client's ApplyStatus does.
func applyStatus(ctx context.Context, client kubeclient.Interface, pod podApply, fieldManager string) error {
	body, err := json.Marshal(pod)
	if err != nil {
		return err
	}
	force := true
	_, err = client.CoreV1().Pods(pod.Metadata.Namespace).Patch(ctx, pod.Metadata.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager, Force: &force}, "status")
	return err
}
