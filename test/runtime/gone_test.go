//go:build runtime

package runtimetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/worker"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// removeFirst is the runtime as probed wires it (decorator.Limited over
// decorator.Verified), except that the first time a kill reaches step ("check",
// its owner check, or "stop") the container is removed from containerd
// first: it exited and was removed as its probe failed.
type removeFirst struct {
	*decorator.Limited
	step   string
	remove func()
	once   sync.Once
}

func (r *removeFirst) CheckOwner(ctx context.Context, id string) error {
	if r.step == "check" {
		r.once.Do(r.remove)
	}
	return r.Limited.CheckOwner(ctx, id)
}

func (r *removeFirst) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	if r.step == "stop" {
		r.once.Do(r.remove)
	}
	return r.Limited.StopContainer(ctx, id, grace)
}

// Issue 31, 1: a liveness kill of a container containerd no longer knows,
// removed between the probe's failure and the stop, before the owner check
// or after it, with each client: the Killing event, then a stop that
// counts as done (the kubelet's NotFound rule), one token of the node's
// restart budget, no ContainerMismatch and no retry.
func TestKillOfARemovedContainerIsDone(t *testing.T) {
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		h := need(t)
		for _, step := range []string{"check", "stop"} {
			t.Run("removed before the "+step, func(t *testing.T) {
				c := newContainer(t, ctrd.ContainerSpec{Name: "app", Command: idleCommand})
				reg := prometheus.NewRegistry()
				m := decorator.NewMetrics(reg)
				verified, err := decorator.NewVerified(rt, m)
				if err != nil {
					t.Fatal(err)
				}
				runtime := &removeFirst{Limited: decorator.NewLimited(verified, decorator.DefaultMaxConcurrentExecs, m), step: step, remove: func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if _, err := h.CRI().StopContainer(ctx, stopRequest(c.ID, 0)); err != nil {
						t.Errorf("stopping the container behind probed's back: %v", err)
					}
					if _, err := h.CRI().RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.ID}); err != nil {
						t.Errorf("removing the container behind probed's back: %v", err)
					}
				}}
				budget := kill.NewBudget(10, nil)
				w, events, stop := ownedWorker(runtime, c, c.RuntimeID(), probespec.Liveness, &v1.Probe{
					ProbeHandler:  v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(closedPort(t))}},
					PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
				}, func(cfg *worker.Config, events *eventLog) {
					cfg.Metrics = worker.NewMetrics(reg)
					cfg.Killer = &kill.Guard{Inner: &kill.RuntimeKiller{Runtime: runtime, Recorder: events}, Budget: budget}
				})
				defer stop()
				kills := func(outcome string) float64 {
					return counterValue(t, reg, "probed_container_kills_total", map[string]string{"probe_type": "Liveness", "outcome": outcome})
				}
				poll(t, "the kill", 30*time.Second, func() bool { return kills(worker.KillOutcomeSuccess) == 1 })
				if !events.has("Normal Killing app: Container app failed liveness probe, will be restarted") {
					t.Errorf("no Killing event: %v", events.all())
				}
				if events.has("ContainerMismatch") {
					t.Errorf("a container that is gone taken for another pod's: %v", events.all())
				}
				if n := kills(worker.KillOutcomeError); n != 0 {
					t.Errorf("%v failed kills", n)
				}
				if got := budget.Available(); got != 9 {
					t.Errorf("restart budget left %d of 10, want 9", got)
				}
				// The snapshot is published when the tick ends, after the kill.
				poll(t, "the worker on hold after the kill", 5*time.Second, func() bool {
					return w.Snapshot().State == worker.StateOnHold
				})
			})
		}
	})
}
