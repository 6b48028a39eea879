package worker

import (
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/restartpolicy"
	"github.com/probed-dev/probed/pkg/results"
)

// StartupProbe is what the manager knows of one container's probed
// startup probe.
type StartupProbe struct {
	// Live: a startup worker runs; Invalid: the probe was declared but
	// refused (it still gates: the user asked for one); Ended: its worker
	// ended on its own.
	Live, Invalid, Ended bool
}

// PodStarted is probed's own "started" (contract §2) for the containers of
// one pod, by the kubelet's rule (UpdatePodStatus): a running container
// whose startup result for this instance is Success; without a result,
// started unless a startup worker exists. So a container with no probed
// startup probe is started once it runs, and so is one whose startup
// worker ended (the pod is being deleted). Where the kubelet runs the
// container's startup probe (it stayed in the pod spec), started is the
// kubelet's containerStatuses[].started.
//
// The manager pushes the pod's startup probes (Set) under its own lock
// whenever they change, and Forget when the pod goes; workers read it
// without calling back into the manager.
type PodStarted struct {
	startup results.Manager
	// kubeletSpec: probes come from the annotation, so a startupProbe in
	// the pod spec is the kubelet's.
	kubeletSpec bool

	mu    sync.Mutex
	probe map[string]StartupProbe // by container name
	gone  bool
}

// NewPodStarted reads startup results from startup. kubeletSpec says the
// kubelet runs the startup probes left in the pod spec.
func NewPodStarted(startup results.Manager, kubeletSpec bool) *PodStarted {
	return &PodStarted{startup: startup, kubeletSpec: kubeletSpec}
}

// Set replaces the pod's startup probes, by container name.
func (s *PodStarted) Set(probes map[string]StartupProbe) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probe = probes
}

// Forget: the manager stopped tracking the pod; every running container
// counts as started, as for a pod it never tracked.
func (s *PodStarted) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probe, s.gone = nil, true
}

// Started reports whether the container instance cs counts as started.
func (s *PodStarted) Started(pod *v1.Pod, cs *v1.ContainerStatus) bool {
	if cs == nil || cs.State.Running == nil {
		return false
	}
	if v, ok := s.startup.Get(cs.ContainerID); ok {
		return v.Result == results.Success
	}
	s.mu.Lock()
	p, gone := s.probe[cs.Name], s.gone
	s.mu.Unlock()
	if gone {
		return true
	}
	if !p.Live && !p.Invalid && !p.Ended && KubeletRunsStartup(s.kubeletSpec, pod, cs.Name) {
		return cs.Started != nil && *cs.Started
	}
	return !p.Live && !p.Invalid
}

// KubeletRunsStartup reports whether the kubelet runs a startup probe for
// the named container: the pod spec declares one and probed takes its
// probes from the annotation alone (kubeletSpec). probed's liveness and
// readiness probes of that container then wait for the kubelet's started,
// as the kubelet's own would (a probe adoption left with the kubelet, e.g.
// a sidecar's).
func KubeletRunsStartup(kubeletSpec bool, pod *v1.Pod, name string) bool {
	if !kubeletSpec {
		return false
	}
	c := restartpolicy.Container(&pod.Spec, name)
	return c != nil && c.StartupProbe != nil
}
