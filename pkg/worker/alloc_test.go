package worker

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// The steady state of a worker, a probe whose result does not change, must
// not allocate: at thousands of workers every allocated byte turns into GC
// cycles, and their assists into late ticks.
func TestSteadyStateProbeAllocatesNothing(t *testing.T) {
	for _, pt := range []probespec.ProbeType{probespec.Liveness, probespec.Readiness} {
		t.Run(pt.String(), func(t *testing.T) {
			e, w := newEnv(t, pt, v1.Probe{})
			pod := runningPod(epoch)
			pod.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.7"}, {IP: "fd00::7"}}
			e.pods.set(pod)
			ctx := context.Background()
			expectContinue(t, w, "first probe") // publishes the result, creates the series
			<-e.prober.calls
			// One periodic tick as the run loop takes it: lateness observed,
			// then the probe.
			due := epoch
			n := testing.AllocsPerRun(200, func() {
				due = w.ticked(due)
				if !w.doProbe(ctx) {
					t.Fatal("doProbe stopped the worker")
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
// change: the tick taken as the run loop takes it, and a no-op probe.
func BenchmarkIdleTick(b *testing.B) {
	e, w := newEnv(b, probespec.Readiness, v1.Probe{})
	e.pods.set(runningPod(epoch))
	e.prober.calls = make(chan time.Time, 1)
	ctx := context.Background()
	w.doProbe(ctx)
	<-e.prober.calls
	due := epoch
	b.ReportAllocs()
	for b.Loop() {
		due = w.ticked(due)
		w.doProbe(ctx)
		<-e.prober.calls
	}
}
