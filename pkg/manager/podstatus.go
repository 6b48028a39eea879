package manager

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/containerstatus"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/status"
)

// watchResults turns readiness and startup result changes into desired pod
// status. The results caches coalesce, so a slow API server never blocks a worker.
func (m *Manager) watchResults(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.readiness.Updates():
			m.updatePods(m.readiness.Drain())
		case <-m.startup.Updates():
			updates := m.startup.Drain()
			for _, u := range updates {
				if u.Result == results.Success {
					m.triggerReadiness(u)
				}
			}
			m.updatePods(updates)
		}
	}
}

func (m *Manager) updatePods(updates []results.Update) {
	seen := map[types.UID]bool{}
	for _, u := range updates {
		if !seen[u.PodUID] {
			seen[u.PodUID] = true
			m.updateStatus(u.PodUID)
		}
	}
}

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

// updateStatus derives a pod's desired probe status and hands it to the
// status writer. A probe with no result yet for the current container
// instance counts as pending (not ready), unless probed had established its
// result before a restart of probed: then that seed stands until the worker's
// own probes say otherwise, so a restart of probed never flips a condition.
func (m *Manager) updateStatus(uid types.UID) {
	// Computing and handing over happen under one lock, so of two concurrent
	// updates (a result change, a worker exit, a sync) the later computation
	// is always the one the writer keeps.
	m.statusMu.Lock()
	defer m.statusMu.Unlock()
	pod, ok := m.opts.Pods.Pod(uid)
	if !ok {
		return
	}
	m.mu.Lock()
	e := m.pods[uid]
	if e == nil {
		m.mu.Unlock()
		return
	}
	inputs := make([]status.ContainerInput, 0, len(e.order))
	for _, name := range e.order {
		cs := containerstatus.Find(pod, name)
		in := status.ContainerInput{Name: name, Status: cs}
		in.Readiness = m.probeInputLocked(e, name, probespec.Readiness, cs)
		in.Startup = m.probeInputLocked(e, name, probespec.Startup, cs)
		inputs = append(inputs, in)
	}
	key := e.key
	m.mu.Unlock()
	st := status.Derive(inputs)
	st.Generation = pod.Generation
	m.opts.Status.Set(key, st)
}

func (m *Manager) probeInputLocked(e *podEntry, name string, t probespec.ProbeType, cs *v1.ContainerStatus) *status.ProbeInput {
	k := probeKey{name, t}
	if msg, bad := e.invalid[k]; bad {
		return &status.ProbeInput{Invalid: true, InvalidMessage: msg}
	}
	_, live := e.workers[k]
	if _, ended := e.ended[k]; !live && !ended {
		return nil
	}
	in := &status.ProbeInput{}
	if cs != nil && cs.ContainerID != "" {
		var v results.Value
		v, in.Known = m.resultsFor(t).Get(cs.ContainerID)
		in.Result, in.Output, in.Probed = v.Result, v.Output, v.Probed
		if !in.Known {
			if seed := seedFor(e.seeds[name], t); seed != nil {
				in.Result, in.Known = seed(cs.ContainerID)
				in.Probed = in.Known
			}
		}
	}
	if !live && t == probespec.Startup && !in.Known {
		// The startup worker ended with Success on the pod's deletion and
		// took its result along; as in the kubelet, a container without a
		// startup worker counts as started.
		in.Known, in.Result = true, results.Success
	}
	return in
}

func allStatuses(pod *v1.Pod) []v1.ContainerStatus {
	out := make([]v1.ContainerStatus, 0, len(pod.Status.InitContainerStatuses)+len(pod.Status.ContainerStatuses))
	out = append(out, pod.Status.InitContainerStatuses...)
	return append(out, pod.Status.ContainerStatuses...)
}
