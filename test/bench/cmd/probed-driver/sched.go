package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"

	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/worker"
	"github.com/probed-dev/probed/test/bench/benchkit"
)

// sched runs probed's real pkg/worker: one Worker per pod, a readiness probe
// with a 1 s period, the informer-cache stand-in below as PodSource and a
// Prober that only records when it was called. Its metrics are live, as the
// kubelet driver's are; Recorder and Killer are nil (they are not on a
// success path's schedule).
type sched struct {
	n       int
	period  time.Duration
	pods    *podCache
	order   []*v1.Pod
	probers []tickProber

	cancel  context.CancelFunc
	workers []*worker.Worker
}

// podCache is a stand-in for the informer's indexer: a map under a lock.
type podCache struct {
	mu   sync.RWMutex
	pods map[types.UID]*v1.Pod
}

func (c *podCache) Pod(uid types.UID) (*v1.Pod, bool) {
	c.mu.RLock()
	p, ok := c.pods[uid]
	c.mu.RUnlock()
	return p, ok
}

// tickProber is worker i's no-op Prober.
type tickProber struct {
	i   int
	rec *benchkit.Recorder
}

func (p *tickProber) Probe(context.Context, probespec.ProbeType, *v1.Probe, prober.Target, prober.EventSink) (results.Result, string, error) {
	p.rec.Tick(p.i)
	return results.Success, "", nil
}

// benchPod is pod i: running, its container started an hour ago, with a
// readiness probe of the given period. Both schedulers get the same pods.
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
				TimeoutSeconds: 1, PeriodSeconds: max(1, int32(period/time.Second)), SuccessThreshold: 1, FailureThreshold: 3,
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
	// A period under a second is probed's probed.io/periodMilliseconds:
	// the spec keeps 1 s and the worker's Period replaces it.
	if period%time.Second != 0 && period > time.Second {
		return fmt.Errorf("period %v: whole seconds, or under a second", period)
	}
	s.n, s.period = n, period
	s.pods = &podCache{pods: make(map[types.UID]*v1.Pod, n)}
	s.order = make([]*v1.Pod, n)
	s.probers = make([]tickProber, n)
	for i := range n {
		p := benchPod(i, period)
		s.pods.pods[p.UID] = p
		s.order[i] = p
		s.probers[i] = tickProber{i: i, rec: rec}
	}
	s.workers = make([]*worker.Worker, 0, n)
	return nil
}

func (s *sched) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	rm := results.NewManager() // one per probe type, as in probed
	metrics := worker.NewMetrics(prometheus.NewRegistry())
	start := time.Now() // workers created now spread over a period
	for i, pod := range s.order {
		c := &pod.Spec.Containers[0]
		w := worker.New(worker.Config{
			PodUID: pod.UID, PodNamespace: pod.Namespace, PodName: pod.Name,
			Container: c, ProbeType: probespec.Readiness, Spec: c.ReadinessProbe,
			Prober: &s.probers[i], Pods: s.pods, Results: rm,
			DaemonStart: start, Metrics: metrics,
			Period: subSecond(s.period),
		})
		s.workers = append(s.workers, w)
		go w.Run(ctx)
	}
	// Drain the results' change signal as the status writer would.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-rm.Updates():
				_ = rm.Drain()
			}
		}
	}()
	return nil
}

// subSecond is the worker's Period for a period under a second, else 0.
func subSecond(period time.Duration) time.Duration {
	if period < time.Second {
		return period
	}
	return 0
}

func (s *sched) Stop() {
	for _, w := range s.workers {
		w.Stop()
	}
	for _, w := range s.workers {
		<-w.Done()
	}
	s.cancel()
}
