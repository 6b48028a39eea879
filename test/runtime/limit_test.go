//go:build runtime

package runtimetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/worker"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// TestConcurrencyCap: 50 simultaneous execs through the per-node cap all
// complete with their own output; none is lost, none runs beyond the cap.
func TestConcurrencyCap(t *testing.T) {
	const execs, slots = 50, decorator.DefaultMaxConcurrentExecs
	c := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		reg := prometheus.NewRegistry()
		m := decorator.NewMetrics(reg)
		l := decorator.NewLimited(rt, slots, m)
		var wg sync.WaitGroup
		var ok, maxSeen atomic.Int32
		stop := make(chan struct{})
		go func() { // sample the in-flight gauge while the execs run
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				if v := int32(gaugeValue(t, reg, "probed_runtime_exec_in_flight")); v > maxSeen.Load() {
					maxSeen.Store(v)
				}
			}
		}()
		start := time.Now()
		for i := 0; i < execs; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				want := fmt.Sprintf("exec-%d\n", i)
				out, code, err := l.ExecInContainer(context.Background(), c.RuntimeID(),
					[]string{"sh", "-c", "sleep 0.2; echo exec-" + fmt.Sprint(i)}, 60*time.Second)
				if err != nil || code != 0 || string(out) != want {
					t.Errorf("exec %d: out %q code %d err %v", i, out, code, err)
					return
				}
				ok.Add(1)
			}()
		}
		wg.Wait()
		close(stop)
		t.Logf("%d execs through %d slots in %v; max in flight seen %d", execs, slots, time.Since(start), maxSeen.Load())
		if ok.Load() != execs {
			t.Errorf("%d of %d execs succeeded", ok.Load(), execs)
		}
		if maxSeen.Load() > slots {
			t.Errorf("in flight reached %d, cap %d", maxSeen.Load(), slots)
		}
		name := cri.RuntimeName(rt)
		if got := counterValue(t, reg, "probed_runtime_exec_total",
			map[string]string{"runtime": name, "outcome": decorator.OutcomeSuccess}); got != execs {
			t.Errorf("exec_total{success} = %v, want %d", got, execs)
		}
	})
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Error(err)
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) > 0 {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	return 0
}

// counterValue reads one series of a counter, picked by its label values.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestHungExecsNeverFailAHealthyLiveness is issue 11's scenario: ten exec
// probes hang in their containers and hold every exec slot of the node; a
// healthy container's exec liveness probe at failureThreshold 1 queues
// behind them. Its waits run out in the queue, and that is probed's own
// limit, never the container's failure: no kill, no Killing event, the
// container keeps running, and the skipped runs are counted. (With the
// per-pod share and the hold limit off: with them, the queue never gets
// this long; see TestNoisyPodDoesNotStarveAnothersLiveness.)
func TestHungExecsNeverFailAHealthyLiveness(t *testing.T) {
	const slots = 10
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		h := need(t)
		hung := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
		healthy := newContainer(t, ctrd.ContainerSpec{Name: "app", Command: idleCommand})
		reg := prometheus.NewRegistry()
		l := decorator.NewLimitedWith(rt, decorator.LimitOptions{MaxConcurrent: slots, PerPod: slots, MaxHold: -1, Metrics: decorator.NewMetrics(reg)})

		ctx, release := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() { release(); wg.Wait() }()
		for range slots {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, _ = l.ExecInContainer(ctx, hung.RuntimeID(), []string{"sleep", "300"}, 5*time.Minute)
			}()
		}
		poll(t, "every exec slot held by a hung exec", 30*time.Second, func() bool {
			return gaugeValue(t, reg, "probed_runtime_exec_in_flight") == slots
		})

		w, _, events, stop := startLivenessWorker(l, "queued", healthy.RuntimeID(), &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
		})
		defer stop()
		name := cri.RuntimeName(rt)
		queued := func() float64 {
			return counterValue(t, reg, "probed_runtime_exec_total", map[string]string{"runtime": name, "outcome": decorator.OutcomeQueueTimeout})
		}
		// Three runs skipped in the queue, or (the bug) a kill.
		poll(t, "three probes skipped in the queue", 30*time.Second, func() bool { return queued() >= 3 || events.has("Killing") })

		if events.has("Killing") || events.has("Unhealthy") {
			t.Errorf("a probe that never got an exec slot reached the container's pod: %v", events.events)
		}
		st, err := h.ContainerState(context.Background(), healthy.ID)
		if err != nil || st != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("healthy container state = %v, %v; want running", st, err)
		}
		s := w.Snapshot()
		if s.State == worker.StateOnHold || s.LastResult != "" {
			t.Errorf("worker state %q, last counted result %q; want no counted result", s.State, s.LastResult)
		}
		for _, e := range s.History {
			if e.Result != "error" || !strings.Contains(e.Error, "no exec slot free") {
				t.Errorf("history entry %+v; want a discarded slot timeout", e)
			}
		}

		// Once the slots free up, the probe runs and passes.
		release()
		wg.Wait()
		poll(t, "a passing probe after the slots freed", 15*time.Second, func() bool {
			s := w.Snapshot()
			return s.LastResult == "success"
		})
		if events.has("Killing") {
			t.Errorf("killed after all: %v", events.events)
		}
	})
}

// Issue 20, item 3, on the real runtime: a noisy pod with ten exec probes
// hung in its container, and then ten noisy pods with one each, next to a
// victim pod whose exec liveness probe runs every second with a 1 s
// timeout. With the defaults (two slots per pod, 500ms hold), every one of
// the victim's probes runs and passes: none is skipped in the queue, none
// fails, nothing is killed.
func TestNoisyPodDoesNotStarveAnothersLiveness(t *testing.T) {
	const slots = 10
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		h := need(t)
		victim := newContainer(t, ctrd.ContainerSpec{Name: "app", Command: idleCommand})
		for _, layout := range []struct {
			name       string
			pods, each int
		}{{"one pod, ten hung probes", 1, 10}, {"ten pods, one hung probe each", 10, 1}} {
			t.Run(layout.name, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				l := decorator.NewLimitedWith(rt, decorator.LimitOptions{MaxConcurrent: slots, Metrics: decorator.NewMetrics(reg)})
				noisy := newContainer(t, ctrd.ContainerSpec{Name: "noisy", Command: idleCommand})
				ctx, release := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				defer func() { release(); wg.Wait() }()
				for p := range layout.pods {
					owner := cri.Owner{PodNamespace: "ns", PodName: fmt.Sprintf("noisy-%d", p), PodUID: fmt.Sprintf("uid-noisy-%d", p), Container: "noisy"}
					for range layout.each {
						wg.Add(1)
						go func() {
							defer wg.Done()
							_, _, _ = l.ExecInContainer(cri.WithOwner(ctx, owner), noisy.RuntimeID(), []string{"sleep", "300"}, 5*time.Minute)
						}()
					}
				}
				want := float64(min(slots, layout.pods*decorator.DefaultMaxConcurrentExecsPerPod))
				poll(t, "the noisy pods' execs holding their slots", 30*time.Second, func() bool {
					return gaugeValue(t, reg, "probed_runtime_exec_in_flight") >= want
				})

				w, _, events, stop := startLivenessWorker(l, "victim", victim.RuntimeID(), &v1.Probe{
					ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
					PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
				})
				defer stop()
				poll(t, "six liveness probes of the victim", 30*time.Second, func() bool { return len(w.Snapshot().History) >= 6 })
				for _, e := range w.Snapshot().History {
					if e.Result != "success" {
						t.Errorf("victim probe %+v; want every one run and passed", e)
					}
				}
				name := cri.RuntimeName(rt)
				if got := counterValue(t, reg, "probed_runtime_exec_total", map[string]string{"runtime": name, "outcome": decorator.OutcomeQueueTimeout}); got != 0 {
					t.Errorf("%v execs skipped in the queue", got)
				}
				if events.has("Killing") || events.has("Unhealthy") {
					t.Errorf("events on the victim: %v", events.events)
				}
				if st, err := h.ContainerState(context.Background(), victim.ID); err != nil || st != runtimeapi.ContainerState_CONTAINER_RUNNING {
					t.Errorf("victim container state = %v, %v; want running", st, err)
				}
				t.Logf("slot yields: %v", counterValue(t, reg, "probed_runtime_exec_slot_yields_total", nil))
			})
		}
	})
}
