package manager

import (
	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/status"
)

// triggerReadiness runs a container's readiness probe at once when its startup
// probe succeeds, as the kubelet does, so readiness does not wait a whole period.
func (m *Manager) triggerReadiness(u results.Update) {
	pod, ok := m.opts.Pods.Pod(u.PodUID)
	if !ok {
		return
	}
	name := ""
	for _, cs := range allStatuses(pod) {
		if cs.ContainerID == u.ContainerID {
			name = cs.Name
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.pods[u.PodUID]; e != nil {
		if w := e.workers[probeKey{name, probespec.Readiness}]; w != nil {
			w.Trigger()
		}
	}
}

// pushProbesLocked hands the feed the pod's probes as the manager now
// knows them; the feed derives from nothing else the manager holds.
func (m *Manager) pushProbesLocked(e *podEntry) {
	state := func(name string, t probespec.ProbeType) status.ProbeState {
		k := probeKey{name, t}
		msg, invalid := e.invalid[k]
		_, live := e.workers[k]
		_, ended := e.ended[k]
		return status.ProbeState{Live: live, Ended: ended, Invalid: invalid, InvalidMessage: msg}
	}
	set := status.ProbeSet{Key: e.key, Containers: make([]status.ContainerProbes, 0, len(e.order)), Seeds: status.CloneSeeds(e.seeds)}
	for _, name := range e.order {
		set.Containers = append(set.Containers, status.ContainerProbes{
			Name: name, Readiness: state(name, probespec.Readiness), Startup: state(name, probespec.Startup),
		})
	}
	m.feed.SetProbes(set)
}

func allStatuses(pod *v1.Pod) []v1.ContainerStatus {
	out := make([]v1.ContainerStatus, 0, len(pod.Status.InitContainerStatuses)+len(pod.Status.ContainerStatuses))
	out = append(out, pod.Status.InitContainerStatuses...)
	return append(out, pod.Status.ContainerStatuses...)
}
