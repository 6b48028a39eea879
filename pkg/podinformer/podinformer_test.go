package podinformer

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStripManagedFields(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: mf}}
	got, err := StripManagedFields(pod)
	if err != nil || got != pod || pod.ManagedFields != nil || pod.Name != "p" {
		t.Errorf("pod: same object %v, err %v, managedFields %v", got == pod, err, pod.ManagedFields)
	}
	// Anything else (a tombstone, another kind) passes untouched.
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{ManagedFields: mf}}
	if got, err := StripManagedFields(node); err != nil || got != node || node.ManagedFields == nil {
		t.Errorf("node: same object %v, err %v, managedFields %v", got == node, err, node.ManagedFields)
	}
}
