package worker

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// TestResultChangeEvents: with ResultChangeEvents, a Normal
// ProbeResultChanged event each time the decided result flips (at the
// thresholds, not per probe), a failure's output in it and never a
// success's; a new container instance starts from its initial value; a
// seeded result that holds emits nothing. Without it, none.
func TestResultChangeEvents(t *testing.T) {
	const changed = testContainer + " Normal ProbeResultChanged "
	steps := func(e *env, w *Worker) {
		t.Helper()
		run := func(r results.Result, out string, n int) {
			e.prober.mu.Lock()
			e.prober.result, e.prober.output = r, out
			e.prober.mu.Unlock()
			for i := range n {
				expectContinue(t, w, fmt.Sprintf("%v %d", r, i))
			}
		}
		run(results.Success, "body", 3)   // Failure (initial) -> Success once
		run(results.Failure, "boom", 1)   // below the threshold of 2
		run(results.Success, "body", 1)   // no flip
		run(results.Failure, "boom", 3)   // -> Failure once
		run(results.Success, "secret", 2) // -> Success
	}
	want := []string{
		changed + "Readiness probe result changed from Failure to Success",
		changed + "Readiness probe result changed from Success to Failure: boom",
		changed + "Readiness probe result changed from Failure to Success",
	}
	onlyChanges := func(e *env) []string {
		var out []string
		for _, ev := range e.rec.list() {
			if len(ev) >= len(changed) && ev[:len(changed)] == changed {
				out = append(out, ev)
			}
		}
		return out
	}

	t.Run("on", func(t *testing.T) {
		e, w := newEnv(t, probespec.Readiness, v1.Probe{FailureThreshold: 2}, func(c *Config) { c.ResultChangeEvents = true })
		e.pods.set(runningPod(epoch))
		steps(e, w)
		if got := onlyChanges(e); !reflect.DeepEqual(got, want) {
			t.Errorf("events = %q\nwant %q", got, want)
		}
		// A new instance starts from Failure again: its first success is a change.
		e.pods.set(withID(runningPod(epoch), newID))
		expectContinue(t, w, "new instance")
		if got := onlyChanges(e); len(got) != len(want)+1 || got[len(want)] != want[0] {
			t.Errorf("after a restart: %q", got)
		}
	})

	t.Run("off", func(t *testing.T) {
		e, w := newEnv(t, probespec.Readiness, v1.Probe{FailureThreshold: 2})
		e.pods.set(runningPod(epoch))
		steps(e, w)
		if got := onlyChanges(e); got != nil {
			t.Errorf("events without the option: %q", got)
		}
	})

	t.Run("seeded success holds", func(t *testing.T) {
		e, w := newEnv(t, probespec.Readiness, v1.Probe{}, func(c *Config) {
			c.ResultChangeEvents = true
			c.InitialResult = func(string) (results.Result, bool) { return results.Success, true }
		})
		e.pods.set(runningPod(epoch))
		for i := range 3 {
			expectContinue(t, w, fmt.Sprint(i))
		}
		if got := onlyChanges(e); got != nil {
			t.Errorf("a restart of probed that changed nothing emitted %q", got)
		}
	})
}
