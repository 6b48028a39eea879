package worker

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// A kill the Killer cancels for good (the workload guard's pause) starts
// the probing over in the same worker: the hold lifts, the result goes back
// to the initial Success, and the kill is asked for again only after
// failureThreshold fresh failures, never on the next tick.
func TestCancelledKillProbesAgain(t *testing.T) {
	e, w := newEnv(t, probespec.Liveness, v1.Probe{FailureThreshold: 2})
	e.pods.set(runningPod(epoch))
	e.prober.set(results.Failure)
	e.killer.err = fmt.Errorf("wrapped: %w", &kill.DeferredError{Reason: kill.DeferWorkloadGuard, Message: "paused", Reprobe: true})

	expectContinue(t, w, "failure 1")
	expectContinue(t, w, "failure 2: kill cancelled")
	if n := len(e.killer.calls()); n != 1 {
		t.Fatalf("kill attempts = %d, want 1", n)
	}
	if s := w.Snapshot(); s.State == StateOnHold {
		t.Error("still on hold after a cancelled kill")
	}
	expectResult(t, e, testID, results.Success, "after a cancelled kill")

	expectContinue(t, w, "fresh failure 1")
	if n := len(e.killer.calls()); n != 1 {
		t.Fatalf("kill asked for again after one fresh failure (%d attempts)", n)
	}
	expectContinue(t, w, "fresh failure 2")
	if n := len(e.killer.calls()); n != 2 {
		t.Fatalf("kill attempts = %d, want 2", n)
	}
	if got := e.prober.count(); got != 4 {
		t.Errorf("probed %d times, want 4", got)
	}
	if got := testutil.ToFloat64(e.metrics.kills.WithLabelValues("Liveness", KillOutcomeDeferred)); got != 2 {
		t.Errorf("kills{outcome=deferred} = %v, want 2", got)
	}
}
