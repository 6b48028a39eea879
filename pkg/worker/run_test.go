package worker

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// start runs w in its own goroutine and makes sure it has ended, cleanly,
// before the test returns.
func start(t *testing.T, w *Worker) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	go w.Run(ctx)
	t.Cleanup(func() {
		w.Stop()
		recv(t, w.Done(), "worker exit")
		cancel()
	})
	return cancel
}

// histogram returns the sample count and sum of a histogram series.
func histogram(t *testing.T, reg prometheus.Gatherer, name string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	return 0, 0
}

func TestRunProbesEveryPeriod(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{PeriodSeconds: 10})
	e.pods.set(runningPod(epoch))
	start(t, w)

	if d := recv(t, e.clock.armed, "ticker"); d != 10*time.Second {
		t.Fatalf("ticker armed for %v, want 10s", d)
	}
	if at := recv(t, e.prober.calls, "first probe"); !at.Equal(epoch) {
		t.Fatalf("first probe at %v, want at once", at)
	}
	for i := 1; i <= 3; i++ {
		e.clock.Step(10 * time.Second)
		if at := recv(t, e.prober.calls, "periodic probe"); !at.Equal(epoch.Add(time.Duration(i) * 10 * time.Second)) {
			t.Fatalf("probe %d at %v", i, at.Sub(epoch))
		}
	}
	if n, sum := histogram(t, e.reg, "probed_probe_lateness_seconds"); n != 3 || sum != 0 {
		t.Errorf("lateness: %d samples, sum %v; want 3, 0", n, sum)
	}
}

// A probe slower than the period gets one late tick, then the grid resumes,
// as with time.Ticker; the lateness is measured against the grid.
func TestRunLateTick(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{PeriodSeconds: 10})
	e.pods.set(runningPod(epoch))
	e.prober.gate = make(chan struct{})
	start(t, w)

	recv(t, e.prober.calls, "first probe")
	e.clock.Step(25 * time.Second) // the probe takes 25s; ticks due at 10 and 20
	e.prober.gate <- struct{}{}

	if at := recv(t, e.prober.calls, "late probe"); !at.Equal(epoch.Add(25 * time.Second)) {
		t.Fatalf("late probe at %v, want 25s", at.Sub(epoch))
	}
	e.prober.gate <- struct{}{}
	e.clock.Step(5 * time.Second) // the next grid point, 30s
	if at := recv(t, e.prober.calls, "on-grid probe"); !at.Equal(epoch.Add(30 * time.Second)) {
		t.Fatalf("next probe at %v, want 30s", at.Sub(epoch))
	}
	e.prober.gate <- struct{}{}
	if n, sum := histogram(t, e.reg, "probed_probe_lateness_seconds"); n != 2 || sum != 15 {
		t.Errorf("lateness: %d samples, sum %v; want 2, 15", n, sum)
	}
}

func TestRunJitter(t *testing.T) {
	tests := []struct {
		name      string
		sinceBoot time.Duration
		jitter    bool
	}{
		{"daemon just started", 0, true},
		{"daemon started 9s ago", 9 * time.Second, true},
		{"daemon started one period ago", 10 * time.Second, false},
		{"daemon started long ago", time.Hour, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, w := newEnv(t, probespec.Readiness, v1.Probe{PeriodSeconds: 10}, func(c *Config) {
				c.DaemonStart = epoch.Add(-tc.sinceBoot)
				c.Rand = func() float64 { return 0.25 }
			})
			e.pods.set(runningPod(epoch))
			start(t, w)

			first := epoch
			if tc.jitter {
				if d := recv(t, e.clock.armed, "jitter"); d != 2500*time.Millisecond {
					t.Fatalf("jitter = %v, want 2.5s (0.25 of the period)", d)
				}
				if n := e.prober.count(); n != 0 {
					t.Fatalf("probed %d times during the jitter", n)
				}
				e.clock.Step(2500 * time.Millisecond)
				first = epoch.Add(2500 * time.Millisecond)
			}
			if d := recv(t, e.clock.armed, "ticker"); d != 10*time.Second {
				t.Fatalf("ticker armed for %v, want 10s", d)
			}
			if at := recv(t, e.prober.calls, "first probe"); !at.Equal(first) {
				t.Fatalf("first probe at %v, want %v", at.Sub(epoch), first.Sub(epoch))
			}
		})
	}
}

// A trigger during the jitter (a startup probe just succeeded) probes at
// once instead of waiting out up to a whole period.
func TestTriggerEndsJitter(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{PeriodSeconds: 60}, func(c *Config) {
		c.DaemonStart = epoch
		c.Rand = func() float64 { return 0.9 }
	})
	e.pods.set(runningPod(epoch))
	start(t, w)
	if d := recv(t, e.clock.armed, "jitter"); d != 54*time.Second {
		t.Fatalf("jitter = %v, want 54s", d)
	}
	w.Trigger()
	if at := recv(t, e.prober.calls, "probe after trigger"); !at.Equal(epoch) {
		t.Fatalf("probed at +%v, want at once", at.Sub(epoch))
	}
}

// A trigger that comes before Run (the manager saw the container running
// when it created the worker) is the worker's first probe: at once, without
// a start-up jitter, and once, not twice.
func TestTriggerBeforeRunIsTheFirstProbe(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{PeriodSeconds: 60}, func(c *Config) {
		c.DaemonStart = epoch // would jitter
		c.Rand = func() float64 { return 0.9 }
	})
	e.pods.set(runningPod(epoch))
	w.Trigger()
	start(t, w)
	if d := recv(t, e.clock.armed, "ticker"); d != 60*time.Second {
		t.Fatalf("armed %v; want the 60s ticker, no jitter", d)
	}
	if at := recv(t, e.prober.calls, "first probe"); !at.Equal(epoch) {
		t.Fatalf("first probe at +%v, want at once", at.Sub(epoch))
	}
	// The trigger's token is spent: nothing runs until the next tick.
	e.clock.Step(59 * time.Second)
	select {
	case at := <-e.prober.calls:
		t.Fatalf("a second probe at +%v for one trigger", at.Sub(epoch))
	case <-time.After(100 * time.Millisecond):
	}
	e.clock.Step(time.Second)
	if at := recv(t, e.prober.calls, "periodic probe"); !at.Equal(epoch.Add(60 * time.Second)) {
		t.Fatalf("periodic probe at +%v", at.Sub(epoch))
	}
}

func TestStopDuringJitter(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{}, func(c *Config) { c.DaemonStart = epoch })
	e.pods.set(runningPod(epoch))
	go w.Run(context.Background())
	recv(t, e.clock.armed, "jitter")
	w.Stop()
	recv(t, w.Done(), "exit")
	if n := e.prober.count(); n != 0 {
		t.Errorf("probed %d times", n)
	}
	if !e.clock.idle() {
		t.Error("the jitter timer was left armed")
	}
	if e.exits.Load() != 1 {
		t.Errorf("OnExit called %d times", e.exits.Load())
	}
}

func TestStopBeforeRun(t *testing.T) {
	e, w := newEnv(t, probespec.Liveness, v1.Probe{})
	e.pods.set(runningPod(epoch))
	w.Stop()
	w.Stop()
	w.Run(context.Background())
	recv(t, w.Done(), "exit")
	if n := e.prober.count(); n != 0 {
		t.Errorf("a worker stopped before Run probed %d times", n)
	}
	if e.exits.Load() != 1 || w.Snapshot().State != StateStopped {
		t.Errorf("exits = %d, state = %q", e.exits.Load(), w.Snapshot().State)
	}
	// Run again: a no-op, OnExit is not called twice.
	w.Run(context.Background())
	if e.exits.Load() != 1 {
		t.Errorf("OnExit called %d times after a second Run", e.exits.Load())
	}
	w.Stop() // after Run too
}

func TestContextCancelEndsRun(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{})
	e.pods.set(runningPod(epoch))
	cancel := start(t, w)
	recv(t, e.prober.calls, "first probe")
	cancel()
	recv(t, w.Done(), "exit on cancel")
}

func TestContextCancelDuringJitter(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{}, func(c *Config) { c.DaemonStart = epoch })
	ctx, cancel := context.WithCancel(context.Background())
	go w.Run(ctx)
	recv(t, e.clock.armed, "jitter")
	cancel()
	recv(t, w.Done(), "exit on cancel")
	if e.prober.count() != 0 {
		t.Error("probed after cancel")
	}
}

func TestTriggerResetsTicker(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{PeriodSeconds: 10})
	e.pods.set(runningPod(epoch))
	start(t, w)
	recv(t, e.clock.armed, "ticker")
	recv(t, e.prober.calls, "first probe")

	e.clock.Step(6 * time.Second)
	w.Trigger()
	if d := recv(t, e.clock.armed, "ticker reset"); d != 10*time.Second {
		t.Fatalf("ticker reset to %v, want a whole period", d)
	}
	if at := recv(t, e.prober.calls, "manual probe"); !at.Equal(epoch.Add(6 * time.Second)) {
		t.Fatalf("manual probe at %v, want 6s", at.Sub(epoch))
	}

	// The old schedule would tick at 10s; the reset one ticks at 16s.
	e.clock.Step(4 * time.Second)
	e.clock.Step(6 * time.Second)
	if at := recv(t, e.prober.calls, "periodic probe"); !at.Equal(epoch.Add(16 * time.Second)) {
		t.Fatalf("periodic probe at %v, want 16s", at.Sub(epoch))
	}
	if n, sum := histogram(t, e.reg, "probed_probe_lateness_seconds"); n != 1 || sum != 0 {
		t.Errorf("lateness: %d samples, sum %v; want 1 on-time tick", n, sum)
	}
}

func TestTriggerNeverBlocks(t *testing.T) {
	_, w := newEnv(t, probespec.Readiness, v1.Probe{})
	for i := 0; i < 5; i++ {
		w.Trigger()
	}
	if n := len(w.manualTriggerCh); n != 1 {
		t.Errorf("%d triggers queued, want them coalesced into 1", n)
	}
}

func TestZeroPeriodFallsBackToDefault(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{}, func(c *Config) {
		s := *c.Spec
		s.PeriodSeconds = 0
		c.Spec = &s
	})
	start(t, w)
	if d := recv(t, e.clock.armed, "ticker"); d != defaultPeriod {
		t.Errorf("ticker armed for %v, want %v", d, defaultPeriod)
	}
}

func TestRunEndsWhenPodTerminates(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{})
	pod := runningPod(epoch)
	e.pods.set(pod)
	start(t, w)
	recv(t, e.prober.calls, "first probe")

	done := pod.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	e.pods.set(done)
	e.clock.Step(10 * time.Second)
	recv(t, w.Done(), "exit on a terminated pod")
	if _, ok := e.results.Get(testID); ok {
		t.Error("result kept after the worker ended")
	}
	if e.exits.Load() != 1 {
		t.Errorf("OnExit called %d times", e.exits.Load())
	}
}

func TestCleanUp(t *testing.T) {
	for _, pt := range []probespec.ProbeType{probespec.Liveness, probespec.Readiness} {
		t.Run(pt.String(), func(t *testing.T) {
			e, w := newEnv(t, pt, v1.Probe{})
			e.pods.set(runningPod(epoch))
			go w.Run(context.Background())

			recv(t, e.prober.calls, "first probe")
			e.clock.Step(10 * time.Second)
			recv(t, e.prober.calls, "second probe") // so the first one is fully recorded
			expectResult(t, e, testID, results.Success, "running")
			if n := testutil.CollectAndCount(e.metrics.probeTotal); n != 1 {
				t.Fatalf("prober_probe_total has %d series while running, want 1", n)
			}
			if g := testutil.ToFloat64(e.metrics.workers.WithLabelValues(pt.String())); g != 1 {
				t.Fatalf("probed_workers = %v while running", g)
			}

			for i := 0; i < 10; i++ {
				w.Stop() // idempotent
			}
			recv(t, w.Done(), "exit")

			if _, ok := e.results.Get(testID); ok {
				t.Error("result not removed")
			}
			if n := testutil.CollectAndCount(e.metrics.probeTotal); n != 0 {
				t.Errorf("prober_probe_total keeps %d series", n)
			}
			if n := testutil.CollectAndCount(e.metrics.probeDuration); n != 0 {
				t.Errorf("prober_probe_duration_seconds keeps %d series", n)
			}
			if g := testutil.ToFloat64(e.metrics.workers.WithLabelValues(pt.String())); g != 0 {
				t.Errorf("probed_workers = %v after exit", g)
			}
			if e.exits.Load() != 1 {
				t.Errorf("OnExit called %d times", e.exits.Load())
			}
			if !e.clock.idle() {
				t.Error("a timer or ticker was left running")
			}
			if s := w.Snapshot(); s.State != StateStopped {
				t.Errorf("state = %q", s.State)
			}
		})
	}
}

func TestPanicInRunLoopKeepsWorker(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{})
	e.pods.set(runningPod(epoch))
	e.prober.panicWith = "boom"
	start(t, w)
	recv(t, e.prober.calls, "panicking probe")
	e.clock.Step(10 * time.Second)
	recv(t, e.prober.calls, "the worker goes on")
	select {
	case <-w.Done():
		t.Fatal("a panic ended the worker")
	default:
	}
}

// Done is made on demand; asked for after the worker ended, it is closed.
func TestDoneAfterExit(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{})
	e.pods.set(runningPod(epoch))
	w.Stop()
	w.Run(context.Background())
	recv(t, w.Done(), "Done after exit")
}
