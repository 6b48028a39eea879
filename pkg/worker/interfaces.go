package worker

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// Prober runs one probe. *prober.Prober satisfies it. A non-nil error means
// the probe could not be run; the worker then throws the result away, as the
// kubelet does.
type Prober interface {
	Probe(ctx context.Context, probeType probespec.ProbeType, spec *v1.Probe, target prober.Target, events prober.EventSink) (results.Result, string, error)
}

// PodSource returns the latest pod (spec and status) for a UID, normally from
// the informer cache. The worker never mutates the returned pod.
type PodSource interface {
	Pod(uid types.UID) (*v1.Pod, bool)
}

// Recorder emits an Event about one container of a pod. The implementation
// builds the object reference and the fieldPath (spec.containers{c} or
// spec.initContainers{c}).
type Recorder interface {
	Event(pod *v1.Pod, containerName string, eventType, reason, message string)
}

// Killer stops a container that failed its liveness or startup probe. It is
// called from the worker's goroutine while the worker is on hold, so it may
// block for the grace period (the preStop hook, then the stop). An error is logged and counted, and the kill is
// retried on the next tick while the same container instance still runs.
type Killer interface {
	Kill(ctx context.Context, pod *v1.Pod, container *v1.Container, containerID string, probeType probespec.ProbeType, spec *v1.Probe) error
}

// containerEvents addresses the prober's events to this worker's container.
type containerEvents struct {
	w   *Worker
	pod *v1.Pod
}

func (e *containerEvents) Event(eventType, reason, message string) {
	if e.w == nil || e.w.cfg.Recorder == nil {
		return
	}
	e.w.cfg.Recorder.Event(e.pod, e.w.cfg.Container.Name, eventType, reason, message)
}
