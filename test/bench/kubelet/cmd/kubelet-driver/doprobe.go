package main

import (
	"context"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/component-base/metrics"
)

// The bookkeeping of the kubelet's worker.doProbe (pkg/kubelet/prober/worker.go
// at v1.37.2, Apache License 2.0) around a probe that does nothing: the
// status manager's GetPodStatus, the container status scan, the instance and
// start checks, the result metrics and the results cache. Probed's driver
// runs its real pkg/worker the same way, so both sides pay for the same
// steps of a success tick.

// statusManager stands in for pkg/kubelet/status: GetPodStatus copies the
// cached PodStatus out under a read lock.
type statusManager struct {
	mu       sync.RWMutex
	statuses map[types.UID]v1.PodStatus
}

func (m *statusManager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.statuses[uid]
	return s, ok
}

// resultsManager is pkg/kubelet/prober/results's manager: a map under a lock,
// and an update sent only when a result changes. The kubelet's channel holds
// 20 updates and its sync loop drains it; here it holds every worker's first
// two, so that 10,000 workers starting at once do not block on it and skew
// the start of their tick grids, which lateness is measured against.
type resultsManager struct {
	mu      sync.RWMutex
	cache   map[containerID]result
	updates chan types.UID
}

func newResultsManager(workers int) *resultsManager {
	return &resultsManager{cache: map[containerID]result{}, updates: make(chan types.UID, 2*workers+20)}
}

func (m *resultsManager) Set(id containerID, r result, pod *v1.Pod) {
	if m.setInternal(id, r) {
		m.updates <- pod.UID
	}
}

func (m *resultsManager) setInternal(id containerID, r result) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, exists := m.cache[id]
	if !exists || prev != r {
		m.cache[id] = r
		return true
	}
	return false
}

func (m *resultsManager) Remove(id containerID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.cache, id)
}

// The kubelet's prober metrics, registered so that they are live (an
// unregistered component-base metric is a no-op).
var (
	proberResults = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: "prober", Name: "probe_total", StabilityLevel: metrics.BETA,
		Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})
	proberDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: "prober", Name: "probe_duration_seconds", StabilityLevel: metrics.ALPHA,
		Help: "Duration in seconds for a probe response.",
	}, []string{"probe_type", "container", "pod", "namespace"})
)

func init() { metrics.NewKubeRegistry().MustRegister(proberResults, proberDuration) }

func parseContainerID(s string) containerID {
	typ, id, _ := strings.Cut(s, "://")
	return containerID{Type: typ, ID: id}
}

func (c containerID) String() string { return c.Type + "://" + c.ID }
func (c containerID) IsEmpty() bool  { return c == containerID{} }

func getContainerStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for i := range statuses {
		if statuses[i].Name == name {
			return statuses[i], true
		}
	}
	return v1.ContainerStatus{}, false
}

// doProbe is the kubelet's, with the probe itself replaced by the harness's
// hook, which records the call and succeeds.
func (w *worker) doProbe(_ context.Context) (keepGoing bool) {
	defer func() { recover() }() //nolint:errcheck // Actually eat panics (HandleCrash takes care of logging)
	defer runtime.HandleCrash(func(_ interface{}) { keepGoing = true })

	startTime := time.Now()
	status, ok := w.probeManager.statusManager.GetPodStatus(w.pod.UID)
	if !ok {
		return true
	}
	if status.Phase == v1.PodFailed || status.Phase == v1.PodSucceeded {
		return false
	}
	c, ok := getContainerStatus(status.ContainerStatuses, w.container.Name)
	if !ok || len(c.ContainerID) == 0 {
		return true
	}
	if w.containerID.String() != c.ContainerID {
		if !w.containerID.IsEmpty() {
			w.resultsManager.Remove(w.containerID)
		}
		w.containerID = parseContainerID(c.ContainerID)
		w.resultsManager.Set(w.containerID, w.initialValue, w.pod)
		w.onHold = false
	}
	if w.onHold {
		return true
	}
	if c.State.Running == nil {
		return c.State.Terminated == nil || w.pod.Spec.RestartPolicy != v1.RestartPolicyNever
	}
	if w.pod.ObjectMeta.DeletionTimestamp != nil && (w.probeType == liveness || w.probeType == startup) {
		return false
	}
	if int32(time.Since(c.State.Running.StartedAt.Time).Seconds()) < w.spec.InitialDelaySeconds {
		return true
	}
	if c.Started != nil && *c.Started {
		if w.probeType == startup {
			return true
		}
	} else if w.probeType != startup {
		return true
	}

	w.hook.rec.Tick(w.hook.i)
	res := resultSuccess

	switch res {
	case resultSuccess:
		proberResults.With(w.proberResultsSuccessfulMetricLabels).Inc()
		proberDuration.With(w.proberDurationSuccessfulMetricLabels).Observe(time.Since(startTime).Seconds())
	case resultFailure:
		proberResults.With(w.proberResultsFailedMetricLabels).Inc()
	default:
		proberResults.With(w.proberResultsUnknownMetricLabels).Inc()
		proberDuration.With(w.proberDurationUnknownMetricLabels).Observe(time.Since(startTime).Seconds())
	}
	if w.lastResult == res {
		w.resultRun++
	} else {
		w.lastResult = res
		w.resultRun = 1
	}
	if (res == resultFailure && w.resultRun < int(w.spec.FailureThreshold)) ||
		(res == resultSuccess && w.resultRun < int(w.spec.SuccessThreshold)) {
		return true
	}
	w.resultsManager.Set(w.containerID, res, w.pod)
	if (w.probeType == liveness && res == resultFailure) || w.probeType == startup {
		w.onHold = true
		w.resultRun = 0
	}
	return true
}
