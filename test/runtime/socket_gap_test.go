//go:build runtime

package runtimetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/connect"
	"github.com/probed-dev/probed/pkg/worker"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// forEachImplVia runs f per implementation with a Runtime that reaches
// containerd through the relay setup returns; like forEachImpl, it checks
// for leaks after, once the relay is closed.
func forEachImplVia(t *testing.T, setup func(t *testing.T) *socketRelay, f func(t *testing.T, rt cri.Runtime, h *ctrd.Containerd)) {
	h := need(t)
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			opts := im.opts(h)
			relay := setup(t)
			opts.Endpoint = relay.endpoint()
			rt, err := connect.New(context.Background(), opts)
			if err != nil {
				t.Fatalf("connect.New with the socket missing: %v (want a lazy connection)", err)
			}
			f(t, rt, h)
			if err := rt.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			relay.close()
			noLiveExecs(t, h)
			goleak.VerifyNone(t, goleakOpts(ignore)...)
		})
	}
}

func errorsIn(w *worker.Worker, since int) int {
	h := w.Snapshot().History
	n := 0
	for _, e := range h[min(since, len(h)):] {
		if e.Result == "error" {
			n++
		}
	}
	return n
}

// TestRuntimeSocketGap: the runtime socket disappears under a running
// liveness worker with failureThreshold 1, then comes back. During the gap
// every exec probe errors; errors are discarded (the kubelet's semantics: an
// error is not a failure), so nothing is killed, and Ready says what is
// wrong. After the socket comes back the same client reconnects and the
// probes pass again on the same, never restarted container.
func TestRuntimeSocketGap(t *testing.T) {
	var relay *socketRelay
	forEachImplVia(t, func(t *testing.T) *socketRelay {
		relay = newSocketRelay(t, need(t).Socket())
		relay.up()
		return relay
	}, func(t *testing.T, rt cri.Runtime, h *ctrd.Containerd) {
		c := newContainer(t, ctrd.ContainerSpec{Name: "app", Command: []string{"sh", "-c", `touch /tmp/healthy; trap "exit 0" TERM; sleep 100000 & wait`}})
		w, _, events, stop := startLivenessWorker(rt, "gap", c.RuntimeID(), &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
			PeriodSeconds: 1, TimeoutSeconds: 2, SuccessThreshold: 1, FailureThreshold: 1,
		})
		defer stop()
		ctx := context.Background()
		passing := func(since int) func() bool {
			return func() bool {
				s := w.Snapshot()
				return len(s.History) > since && s.History[len(s.History)-1].Result == "success"
			}
		}
		poll(t, "a passing liveness probe", 15*time.Second, passing(0))

		relay.cut()
		cutAt := time.Now()
		mark := len(w.Snapshot().History)
		// Five periods: long enough for gRPC's reconnect back-off to grow.
		poll(t, "five errored probes during the gap", 30*time.Second, func() bool { return errorsIn(w, mark) >= 5 })
		for _, e := range w.Snapshot().History[mark:] {
			if e.Result != "error" {
				t.Errorf("probe result during the gap = %q (%s), want error", e.Result, e.Output)
			}
		}
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		rerr := rt.Ready(rctx)
		rcancel()
		if rerr == nil || !strings.Contains(rerr.Error(), "not ready") {
			t.Errorf("Ready during the gap = %v, want a not-ready error", rerr)
		} else {
			t.Logf("Ready during the gap: %v", rerr)
		}
		if !events.has("Warning Unhealthy app: Liveness probe errored and resulted in unknown state") {
			t.Errorf("no Unhealthy event saying the probe errored; events: %v", events.events)
		}
		if s := w.Snapshot(); s.State != worker.StateRunning {
			t.Errorf("worker state during the gap = %q, want running", s.State)
		}
		gap := time.Since(cutAt)

		relay.up()
		back := time.Now()
		mark = len(w.Snapshot().History)
		// gRPC's reconnect back-off (1 s growing by 1.6x) sets how soon.
		poll(t, "probes pass again after the socket is back", 60*time.Second, passing(mark))
		t.Logf("socket gone %v; first passing probe %v after it came back", gap.Round(10*time.Millisecond), time.Since(back).Round(10*time.Millisecond))
		rctx, rcancel = context.WithTimeout(ctx, 5*time.Second)
		if err := rt.Ready(rctx); err != nil {
			t.Errorf("Ready after the socket came back: %v", err)
		}
		rcancel()

		if events.has("Killing") {
			t.Errorf("a kill happened: %v", events.events)
		}
		if st, err := h.ContainerState(ctx, c.ID); err != nil || st != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container state %v (%v), want running: it must never have been stopped", st, err)
		}
	})
}

// TestRuntimeSocketMissingAtStart: a Runtime made while the socket does not
// exist is made anyway (it connects lazily), is not Ready and fails execs,
// and works once the socket appears, without being made again.
func TestRuntimeSocketMissingAtStart(t *testing.T) {
	var relay *socketRelay
	forEachImplVia(t, func(t *testing.T) *socketRelay {
		relay = newSocketRelay(t, need(t).Socket())
		return relay // not up
	}, func(t *testing.T, rt cri.Runtime, h *ctrd.Containerd) {
		c := newContainer(t, ctrd.ContainerSpec{Name: "app", Command: idleCommand})
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		err := rt.Ready(rctx)
		rcancel()
		if err == nil {
			t.Fatal("Ready with no socket = nil, want an error")
		}
		t.Logf("Ready with no socket: %v", err)
		if _, _, err := rt.ExecInContainer(ctx, c.RuntimeID(), []string{"true"}, 2*time.Second); err == nil {
			t.Error("exec with no socket succeeded")
		}

		relay.up()
		back := time.Now()
		poll(t, "Ready once the socket exists", 60*time.Second, func() bool {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			defer rcancel()
			return rt.Ready(rctx) == nil
		})
		t.Logf("Ready %v after the socket appeared", time.Since(back).Round(10*time.Millisecond))
		out, code, err := rt.ExecInContainer(ctx, c.RuntimeID(), []string{"echo", "hello"}, 5*time.Second)
		if err != nil || code != 0 || strings.TrimSpace(string(out)) != "hello" {
			t.Errorf("exec after the socket appeared = %q %d %v", out, code, err)
		}
	})
}
