package worker

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/kill"
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

// LivenessTracker hears the liveness outcomes the restart guard needs
// (kill.Workloads is one). Its methods must not block.
type LivenessTracker interface {
	// LivenessPassed: a liveness probe of the container passed, or the
	// container no longer has a liveness probe.
	LivenessPassed(podUID types.UID, container string)
	// ForgetPod: the pod left the node or finished.
	ForgetPod(podUID types.UID)
}

// Recorder emits an Event about one container of a pod. The implementation
// builds the object reference and the fieldPath (spec.containers{c} or
// spec.initContainers{c}).
type Recorder interface {
	Event(pod *v1.Pod, containerName string, eventType, reason, message string)
}

// Killer stops a container that failed its liveness or startup probe:
// the chain of package kill, which owns the grace period, the preStop hook,
// the restart budget and the workload guard.
type Killer = kill.Killer

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
