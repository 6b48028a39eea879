package main

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// containerRecorder addresses events to one container of a pod, the way the
// kubelet does, so that `kubectl describe pod` shows them against the container.
type containerRecorder struct {
	Recorder record.EventRecorder
}

// Event records an event on the container's field path; an empty container
// name addresses the pod itself.
func (r containerRecorder) Event(pod *v1.Pod, container, eventType, reason, message string) {
	if r.Recorder == nil || pod == nil {
		return
	}
	r.Recorder.Event(containerRef(pod, container), eventType, reason, capEventMessage(message))
}

// maxEventMessageBytes caps an event's message. Probe bodies are cut at
// 10 KiB, but net/http's error texts quote the response (a malformed
// status line, a Location URL), so a hostile target could otherwise make
// the kubelet's text, and its Unhealthy event, several MiB long.
const maxEventMessageBytes = 12 << 10

func capEventMessage(m string) string {
	if len(m) <= maxEventMessageBytes {
		return m
	}
	cut := maxEventMessageBytes
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return m[:cut] + "... (" + strconv.Itoa(len(m)-cut) + " more bytes)"
}

// containerRef is the object reference of a pod's container, with the kubelet's field path.
func containerRef(pod *v1.Pod, container string) *v1.ObjectReference {
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
