package worker

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// TestSubSecondPeriod: Config.Period (probed.io/periodMilliseconds)
// replaces periodSeconds on the injected clock, Config.Timeout reaches the
// prober, the failure threshold still counts probes, and the result is
// published once per transition.
func TestSubSecondPeriod(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: 3}, func(c *Config) {
		c.Period, c.Timeout = 100*time.Millisecond, 50*time.Millisecond
	})
	e.pods.set(runningPod(epoch))
	// Each probe waits at the gate, so that the results of the probes
	// before it, and only those, are in.
	e.prober.gate = make(chan struct{})
	start(t, w)

	if d := recv(t, e.clock.armed, "ticker"); d != 100*time.Millisecond {
		t.Fatalf("ticker armed for %v, want 100ms", d)
	}
	recv(t, e.prober.calls, "first probe")
	e.prober.set(results.Failure)
	e.prober.gate <- struct{}{}

	const none results.Result = 99
	wantPublished := []results.Result{results.Success, none, none, results.Failure, none}
	for i, want := range wantPublished {
		e.clock.Step(100 * time.Millisecond)
		due := time.Duration(i+1) * 100 * time.Millisecond
		if at := recv(t, e.prober.calls, "periodic probe"); !at.Equal(epoch.Add(due)) {
			t.Fatalf("probe %d at %v, want %v", i+2, at.Sub(epoch), due)
		}
		got := e.results.Drain()
		switch {
		case want == none && len(got) != 0:
			t.Errorf("after probe %d: published %+v; want nothing (below the threshold or no transition)", i+1, got)
		case want != none && (len(got) != 1 || got[0].Result != want):
			t.Errorf("after probe %d: published %+v; want one %v", i+1, got, want)
		}
		e.prober.gate <- struct{}{}
	}
	e.prober.mu.Lock()
	timeout := e.prober.target.Timeout
	e.prober.mu.Unlock()
	if timeout != 50*time.Millisecond {
		t.Errorf("Target.Timeout = %v, want 50ms", timeout)
	}
	if s := w.Snapshot().Spec; !strings.Contains(s, "timeout=50ms period=100ms") {
		t.Errorf("summary %q does not show the millisecond timing", s)
	}
}

// TestSpecSummaryDurations: whole seconds read as before ("90s", never
// "1m30s"); the millisecond extensions read as durations.
func TestSpecSummaryDurations(t *testing.T) {
	p := &v1.Probe{PeriodSeconds: 90, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
		ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	if s := SpecSummary(p); !strings.Contains(s, "timeout=1s period=90s") {
		t.Errorf("SpecSummary = %q", s)
	}
	if s := specSummary(p, 150*time.Millisecond, 1500*time.Millisecond); !strings.Contains(s, "timeout=1.5s period=150ms") {
		t.Errorf("specSummary = %q", s)
	}
}
