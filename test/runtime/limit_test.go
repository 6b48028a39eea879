//go:build runtime

package runtimetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probed-dev/probed/pkg/cri"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// TestConcurrencyCap: 50 simultaneous execs through the per-node cap all
// complete with their own output; none is lost, none runs beyond the cap.
func TestConcurrencyCap(t *testing.T) {
	const execs, slots = 50, cri.DefaultMaxConcurrentExecs
	c := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		reg := prometheus.NewRegistry()
		m := cri.NewMetrics(reg)
		l := cri.NewLimited(rt, slots, m)
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
			map[string]string{"runtime": name, "outcome": cri.OutcomeSuccess}); got != execs {
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
