package worker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// churnProber succeeds on a container's first probe and fails on the later
// ones, so each worker leaves both a successful and a failed series. Startup
// containers get it the other way round: a startup success holds the probe.
type churnProber struct {
	mu    sync.Mutex
	calls map[string]int
}

func (p *churnProber) Probe(_ context.Context, _ probespec.ProbeType, _ *v1.Probe, target prober.Target, _ prober.EventSink) (results.Result, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[target.ContainerID]++
	first := p.calls[target.ContainerID] == 1
	if strings.HasSuffix(target.ContainerID, "-Startup") {
		first = !first
	}
	if first {
		return results.Success, "", nil
	}
	return results.Failure, "", nil
}

func (p *churnProber) count(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[id]
}

// A thousand workers coming and going, in overlapping waves that start and
// end concurrently, by Stop and by their pod finishing, leave no per-pod
// series behind and probed_workers back at zero.
func TestMetricsChurnLeavesNoStaleSeries(t *testing.T) {
	const total, waveSize = 1000, 100
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	pods := &fakePods{}
	pr := &churnProber{calls: map[string]int{}}
	caches := map[probespec.ProbeType]results.Manager{}
	types3 := []probespec.ProbeType{probespec.Liveness, probespec.Readiness, probespec.Startup}
	for _, pt := range types3 {
		caches[pt] = results.NewManager()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type member struct {
		w   *Worker
		id  string
		pod *v1.Pod
	}
	newWave := func(first int) []member {
		wave := make([]member, 0, waveSize)
		for i := first; i < first+waveSize; i++ {
			pt := types3[i%3]
			pod := runningPod(time.Now().Add(-time.Hour))
			pod.UID = types.UID(fmt.Sprintf("uid-%d", i))
			pod.Name = fmt.Sprintf("pod-%d", i)
			id := fmt.Sprintf("containerd://c-%d-%s", i, pt)
			pod.Status.ContainerStatuses[0].ContainerID = id
			pods.set(pod)
			w := New(Config{
				PodUID:       pod.UID,
				PodNamespace: pod.Namespace,
				PodName:      pod.Name,
				Container:    &v1.Container{Name: testContainer},
				ProbeType:    pt,
				// A high threshold: liveness never reaches a kill, startup
				// never holds, so every worker probes on each trigger.
				Spec:    defaulted(v1.Probe{PeriodSeconds: 1, FailureThreshold: 100, SuccessThreshold: 1}),
				Prober:  pr,
				Pods:    pods,
				Results: caches[pt],
				// Startup probes run before "started", the others after.
				Started:     func(*v1.Pod, *v1.ContainerStatus) bool { return pt != probespec.Startup },
				Clock:       clock.RealClock{},
				DaemonStart: time.Now().Add(-time.Hour),
				Metrics:     m,
			})
			wave = append(wave, member{w, id, pod})
		}
		for _, mb := range wave {
			go mb.w.Run(ctx)
		}
		return wave
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, guard, true,
			func(context.Context) (bool, error) { return cond(), nil })
		if err != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	// probedTwice waits for each worker's first probe, triggers a second
	// (a failure) and waits for it.
	probedTwice := func(wave []member) {
		t.Helper()
		for _, mb := range wave {
			waitFor("a first probe of "+mb.id, func() bool { return pr.count(mb.id) >= 1 })
			mb.w.Trigger()
		}
		for _, mb := range wave {
			waitFor("a second probe of "+mb.id, func() bool { return pr.count(mb.id) >= 2 })
		}
	}
	// end ends a wave: most workers by Stop, every tenth by its pod
	// succeeding (the worker sees the phase and exits on its own).
	end := func(wave []member) {
		for i, mb := range wave {
			if i%10 == 0 {
				done := mb.pod.DeepCopy()
				done.Status.Phase = v1.PodSucceeded
				pods.set(done)
				mb.w.Trigger()
				continue
			}
			mb.w.Stop()
		}
	}
	waitDone := func(wave []member) {
		t.Helper()
		for _, mb := range wave {
			select {
			case <-mb.w.Done():
			case <-time.After(guard):
				t.Fatalf("worker %s did not end", mb.id)
			}
		}
	}

	var prev []member
	for first := 0; first < total; first += waveSize {
		// The previous wave ends while this one starts.
		endDone := make(chan struct{})
		go func(wave []member) { defer close(endDone); end(wave) }(prev)
		cur := newWave(first)
		<-endDone
		waitDone(prev)
		probedTwice(cur)
		// Only the live wave's series are left: successful and failed per
		// worker, and one duration histogram. The prober answers before the
		// worker counts, so wait for the count; a stale series never goes.
		waitFor(fmt.Sprintf("wave at %d: exactly %d prober_probe_total series", first, 2*waveSize), func() bool {
			return testutil.CollectAndCount(m.probeTotal) == 2*waveSize
		})
		waitFor(fmt.Sprintf("wave at %d: exactly %d prober_probe_duration_seconds series", first, waveSize), func() bool {
			return testutil.CollectAndCount(m.probeDuration) == waveSize
		})
		prev = cur
	}
	end(prev)
	waitDone(prev)

	if n := testutil.CollectAndCount(m.probeTotal); n != 0 {
		t.Errorf("%d prober_probe_total series left after %d workers ended", n, total)
	}
	if n := testutil.CollectAndCount(m.probeDuration); n != 0 {
		t.Errorf("%d prober_probe_duration_seconds series left after %d workers ended", n, total)
	}
	for _, pt := range types3 {
		if g := testutil.ToFloat64(m.workers.WithLabelValues(pt.String())); g != 0 {
			t.Errorf("probed_workers{probe_type=%q} = %v after every worker ended", pt, g)
		}
	}
	// Nothing per pod anywhere on the page.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "pod" || l.GetName() == "pod_uid" {
					t.Errorf("stale per-pod series: %s %v", mf.GetName(), metric.GetLabel())
				}
			}
		}
	}
}
