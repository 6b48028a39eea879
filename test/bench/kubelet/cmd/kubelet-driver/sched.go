package main

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/test/bench/benchkit"
)

// The kubelet's worker design, re-created from pkg/kubelet/prober/worker.go
// at v1.37.2 (Apache License 2.0): one goroutine and one time.Ticker per
// worker, the same struct (metric label maps included), newWorker's set-up,
// and run()'s loop shape: start-up jitter, ticker, doProbe, select on stop,
// tick or manual trigger. doProbe (doprobe.go) is the kubelet's bookkeeping
// around a probe that only records the call: the probe work itself is what
// the net figures measure.

type metricsLabels map[string]string // component-base's metrics.Labels

type manager struct {
	start         time.Time
	statusManager *statusManager
}

type worker struct {
	stopCh          chan struct{}
	manualTriggerCh chan struct{}
	pod             *v1.Pod
	container       v1.Container
	spec            *v1.Probe
	probeType       probeType
	initialValue    result
	resultsManager  *resultsManager
	probeManager    *manager
	containerID     containerID
	lastResult      result
	resultRun       int
	onHold          bool

	proberResultsSuccessfulMetricLabels  metricsLabels
	proberResultsFailedMetricLabels      metricsLabels
	proberResultsUnknownMetricLabels     metricsLabels
	proberDurationSuccessfulMetricLabels metricsLabels
	proberDurationUnknownMetricLabels    metricsLabels

	// The harness's hook: where the no-op doProbe records its call.
	hook *hook
}

type hook struct {
	i   int
	rec *benchkit.Recorder
	wg  *sync.WaitGroup
}

func newWorker(m *manager, probeType probeType, pod *v1.Pod, container v1.Container) *worker {
	w := &worker{
		stopCh:          make(chan struct{}, 1), // Buffer so stop() can be non-blocking.
		manualTriggerCh: make(chan struct{}, 1), // Buffer so prober_manager can do non-blocking calls to doProbe.
		pod:             pod,
		container:       container,
		probeType:       probeType,
		probeManager:    m,
	}

	switch probeType {
	case readiness:
		w.spec = container.ReadinessProbe
		w.initialValue = resultFailure
	case liveness:
		w.spec = container.LivenessProbe
		w.initialValue = resultSuccess
	case startup:
		w.spec = container.StartupProbe
		w.initialValue = resultUnknown
	}

	basicMetricLabels := metricsLabels{
		"probe_type": w.probeType.String(),
		"container":  w.container.Name,
		"pod":        w.pod.Name,
		"namespace":  w.pod.Namespace,
		"pod_uid":    string(w.pod.UID),
	}

	proberDurationLabels := metricsLabels{
		"probe_type": w.probeType.String(),
		"container":  w.container.Name,
		"pod":        w.pod.Name,
		"namespace":  w.pod.Namespace,
	}

	w.proberResultsSuccessfulMetricLabels = deepCopyPrometheusLabels(basicMetricLabels)
	w.proberResultsSuccessfulMetricLabels["result"] = "successful"

	w.proberResultsFailedMetricLabels = deepCopyPrometheusLabels(basicMetricLabels)
	w.proberResultsFailedMetricLabels["result"] = "failed"

	w.proberResultsUnknownMetricLabels = deepCopyPrometheusLabels(basicMetricLabels)
	w.proberResultsUnknownMetricLabels["result"] = "unknown"

	w.proberDurationSuccessfulMetricLabels = deepCopyPrometheusLabels(proberDurationLabels)
	w.proberDurationUnknownMetricLabels = deepCopyPrometheusLabels(proberDurationLabels)

	return w
}

func deepCopyPrometheusLabels(m metricsLabels) metricsLabels {
	ret := make(metricsLabels, len(m))
	for k, v := range m {
		ret[k] = v
	}
	return ret
}

// run is worker.run's shape; its clean-up only tells the harness.
func (w *worker) run() {
	ctx := context.Background()
	probeTickerPeriod := time.Duration(w.spec.PeriodSeconds) * time.Second

	// If kubelet restarted the probes could be started in rapid succession.
	// Let the worker wait for a random portion of tickerPeriod before probing.
	// Do it only if the kubelet has started recently.
	if probeTickerPeriod > time.Since(w.probeManager.start) {
		time.Sleep(time.Duration(rand.Float64() * float64(probeTickerPeriod)))
	}

	probeTicker := time.NewTicker(probeTickerPeriod)

	defer func() {
		// Clean up.
		probeTicker.Stop()
		w.hook.wg.Done()
	}()

probeLoop:
	for w.doProbe(ctx) {
		// Wait for next probe tick.
		select {
		case <-w.stopCh:
			break probeLoop
		case <-probeTicker.C:
			// continue
		case <-w.manualTriggerCh:
			// Updating the periodic timer to run the probe again at intervals of probeTickerPeriod
			// starting from the moment a manual run occurs.
			probeTicker.Reset(probeTickerPeriod)
			// continue
		}
	}
}

func (w *worker) stop() {
	select {
	case w.stopCh <- struct{}{}:
	default: // Non-blocking.
	}
}

type sched struct {
	done    chan struct{}
	pods    []*v1.Pod
	hooks   []hook
	wg      sync.WaitGroup
	workers []*worker
}

// benchPod is the same pod the probed driver uses.
func benchPod(i int, period time.Duration) *v1.Pod {
	started := true
	name := fmt.Sprintf("pod-%d", i)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", UID: types.UID(fmt.Sprintf("uid-%08d", i))},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:  "app",
			Image: "example/app",
			Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			ReadinessProbe: &v1.Probe{
				ProbeHandler:   v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
				TimeoutSeconds: 1, PeriodSeconds: int32(period / time.Second), SuccessThreshold: 1, FailureThreshold: 3,
			},
		}}},
		Status: v1.PodStatus{
			Phase: v1.PodRunning,
			PodIP: "127.0.0.1",
			ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", Ready: true, Started: &started,
				ContainerID: fmt.Sprintf("containerd://%064x", i),
				State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}},
			}},
		},
	}
}

func (s *sched) Prepare(n int, period time.Duration, rec *benchkit.Recorder) error {
	if period%time.Second != 0 {
		return fmt.Errorf("period %v: whole seconds only", period)
	}
	s.pods = make([]*v1.Pod, n)
	s.hooks = make([]hook, n)
	for i := range s.pods {
		s.pods[i] = benchPod(i, period)
		s.hooks[i] = hook{i: i, rec: rec, wg: &s.wg}
	}
	s.workers = make([]*worker, 0, n)
	return nil
}

func (s *sched) Start() error {
	sm := &statusManager{statuses: make(map[types.UID]v1.PodStatus, len(s.pods))}
	for _, pod := range s.pods {
		sm.statuses[pod.UID] = pod.Status
	}
	m := &manager{start: time.Now(), statusManager: sm}
	rm := newResultsManager(len(s.pods)) // one per probe type, as in the kubelet
	s.done = make(chan struct{})
	// Drain the results' updates as the kubelet's sync loop would.
	go func() {
		for {
			select {
			case <-s.done:
				return
			case <-rm.updates:
			}
		}
	}()
	for i, pod := range s.pods {
		// The manager's AddPod: one worker per probe, the container by value.
		w := newWorker(m, readiness, pod, pod.Spec.Containers[0])
		w.resultsManager = rm
		w.hook = &s.hooks[i]
		s.workers = append(s.workers, w)
		s.wg.Add(1)
		go w.run()
	}
	return nil
}

func (s *sched) Stop() {
	for _, w := range s.workers {
		w.stop()
	}
	s.wg.Wait()
	close(s.done)
}
