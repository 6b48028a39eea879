package kubeclient

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EventSink is client-go's record.EventSink over Interface: each event is
// written in its own namespace, as typedcorev1.EventSinkImpl does.
type EventSink struct {
	Client Interface
}

// Create creates e.
func (s EventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.Client.CoreV1().Events(e.Namespace).Create(context.TODO(), e, metav1.CreateOptions{})
}

// Update replaces e.
func (s EventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.Client.CoreV1().Events(e.Namespace).Update(context.TODO(), e, metav1.UpdateOptions{})
}

// Patch applies a strategic merge patch, data, to e (the broadcaster's
// count and timestamp of a repeated event).
func (s EventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.Client.CoreV1().Events(e.Namespace).Patch(context.TODO(), e.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
