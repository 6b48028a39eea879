//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestProbeResultChangedEvents: with --probe-result-change-events a flip
// of a probe's result is a Normal ProbeResultChanged event on the
// container, with a failure's output and never a success's body; without
// the flag, none.
func TestProbeResultChangedEvents(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("flag=%v", on), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ip := loopbackIP()
			app := startHTTPTarget(t, ip, true)
			pod := e.createPod("flip", mustJSON(probes{
				"app": {"readinessProbe": httpProbe(app.Port, "/ready", map[string]any{"failureThreshold": 1})},
			}), true, container{name: "app"})
			e.runPod(pod, ip, time.Minute)
			var args []string
			if on {
				args = append(args, "--probe-result-change-events")
			}
			e.startProbed(args...)

			e.waitCond("flip", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
			app.Set(false)
			e.waitCond("flip", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
			app.Set(true)
			e.waitCond("flip", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
			// The Unhealthy event of the failure is sent before any change
			// event of the same probe: once it is there, so is the other.
			eventually(t, "the Unhealthy event", 20*time.Second, func() bool {
				return e.findEvent(pod.UID, "Unhealthy", "statuscode: 503") != nil
			})

			changes := func() []v1.Event {
				var out []v1.Event
				for _, ev := range e.events(pod.UID) {
					if ev.Reason == "ProbeResultChanged" {
						out = append(out, ev)
					}
				}
				return out
			}
			if !on {
				consistently(t, "no ProbeResultChanged event", 3*time.Second, func() bool { return len(changes()) == 0 })
				return
			}
			want := []string{
				"Readiness probe result changed from Failure to Success",
				"Readiness probe result changed from Success to Failure: HTTP probe failed with statuscode: 503",
			}
			eventually(t, "the change events", 20*time.Second, func() bool {
				seen := 0
				for _, w := range want {
					if e.findEvent(pod.UID, "ProbeResultChanged", w) != nil {
						seen++
					}
				}
				return seen == len(want)
			})
			for _, ev := range changes() {
				if ev.Type != v1.EventTypeNormal || ev.InvolvedObject.FieldPath != "spec.containers{app}" || ev.Source.Component != "probed" {
					t.Errorf("event %+v; want a Normal event from probed on spec.containers{app}", ev)
				}
				if strings.Contains(ev.Message, "to Success") && !strings.HasSuffix(ev.Message, "to Success") {
					t.Errorf("a success's body reached an event: %q", ev.Message)
				}
			}
		})
	}
}
