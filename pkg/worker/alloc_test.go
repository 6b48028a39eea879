package worker

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// The steady state of a worker, a probe whose result does not change, must
// not allocate: at tens of thousands of workers every allocated byte turns
// into GC cycles, and their assists into late ticks.
func TestSteadyStateProbeAllocatesNothing(t *testing.T) {
	for _, pt := range []probespec.ProbeType{probespec.Liveness, probespec.Readiness} {
		t.Run(pt.String(), func(t *testing.T) {
			e, w := newEnv(t, pt, v1.Probe{})
			e.pods.set(runningPod(epoch))
			ctx := context.Background()
			expectContinue(t, w, "first probe") // publishes the result, creates the series
			// One periodic tick as the run loop takes it: lateness observed,
			// then the probe.
			n := testing.AllocsPerRun(200, func() {
				w.pending.Store(1)
				if !w.step(ctx) {
					t.Fatal("step stopped the worker")
				}
				<-e.prober.calls
			})
			if n != 0 {
				t.Fatalf("a steady-state probe allocates %v objects, want 0", n)
			}
		})
	}
}

// BenchmarkIdleTick is one periodic tick of a worker whose result does not
// change: the scheduler's wake-up taken by step, and a no-op probe.
func BenchmarkIdleTick(b *testing.B) {
	e, w := newEnv(b, probespec.Readiness, v1.Probe{})
	e.pods.set(runningPod(epoch))
	e.prober.calls = make(chan time.Time, 1)
	ctx := context.Background()
	w.doProbe(ctx)
	<-e.prober.calls
	b.ReportAllocs()
	for b.Loop() {
		w.pending.Store(1)
		w.step(ctx)
		<-e.prober.calls
	}
}
