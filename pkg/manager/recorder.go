package manager

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// ContainerRecorder addresses events to one container of a pod, the way the
// kubelet does, so that `kubectl describe pod` shows them against the container.
type ContainerRecorder struct {
	Recorder record.EventRecorder
}

// Event records an event on the container's field path; an empty container
// name addresses the pod itself.
func (r ContainerRecorder) Event(pod *v1.Pod, container, eventType, reason, message string) {
	if r.Recorder == nil || pod == nil {
		return
	}
	r.Recorder.Event(ContainerRef(pod, container), eventType, reason, message)
}

// ContainerRef is the object reference of a pod's container, with the kubelet's field path.
func ContainerRef(pod *v1.Pod, container string) *v1.ObjectReference {
	ref := &v1.ObjectReference{
		Kind:            "Pod",
		APIVersion:      "v1",
		Name:            pod.Name,
		Namespace:       pod.Namespace,
		UID:             pod.UID,
		ResourceVersion: pod.ResourceVersion,
	}
	if container == "" {
		return ref
	}
	ref.FieldPath = fmt.Sprintf("spec.containers{%s}", container)
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container {
			ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", container)
			break
		}
	}
	return ref
}
