package status

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// The apply body is byte for byte what client-go's PodApplyConfiguration
// sent for the same conditions (probed built it that way before it dropped
// the apply configurations for their size): the same fields, the same
// omissions, so the API server merges and owns exactly as before.
func TestApplyConfigurationMatchesClientGo(t *testing.T) {
	at := metav1.Date(2026, 1, 2, 3, 4, 5, 0, metav1.Now().Location()).Rfc3339Copy()
	for name, tc := range map[string]struct {
		key   PodKey
		conds []v1.PodCondition
	}{
		"none":            {PodKey{Namespace: "ns", Name: "p", UID: "u1"}, nil},
		"no uid":          {PodKey{Namespace: "ns", Name: "p"}, []v1.PodCondition{{Type: PodReadyCondition, Status: v1.ConditionTrue, LastTransitionTime: at}}},
		"zero time":       {PodKey{Namespace: "ns", Name: "p", UID: "u1"}, []v1.PodCondition{{Type: "probed.io/ready", Status: v1.ConditionFalse}}},
		"reason, message": {PodKey{Namespace: "ns", Name: "p", UID: "u1"}, []v1.PodCondition{{Type: "a", Status: v1.ConditionTrue, Reason: "R", Message: "m \"q\"", LastTransitionTime: at}, {Type: "b", Status: v1.ConditionUnknown, Reason: "S", LastTransitionTime: at}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(applyConfiguration(tc.key, tc.conds))
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(clientGoApply(tc.key, tc.conds))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("apply body\n got %s\nwant %s", got, want)
			}
		})
	}
}

// clientGoApply is how probed built the request with client-go's apply
// configurations.
func clientGoApply(key PodKey, conds []v1.PodCondition) *corev1ac.PodApplyConfiguration {
	status := corev1ac.PodStatus()
	for _, c := range conds {
		ac := corev1ac.PodCondition().WithType(c.Type).WithStatus(c.Status).WithLastTransitionTime(c.LastTransitionTime)
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
