package decorator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// flakyRuntime answers Ready with whatever err holds.
type flakyRuntime struct {
	fakeRuntime
	mu  sync.Mutex
	err error
}

func (f *flakyRuntime) Ready(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *flakyRuntime) set(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// A blip never makes probed unready; an outage longer than the grace does,
// with the runtime's error, until it answers again.
func TestHealthReportsOnlySustainedOutages(t *testing.T) {
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(epoch)
	rt := &flakyRuntime{}
	reg := prometheus.NewRegistry()
	h := NewHealth(rt, 5*time.Second, 30*time.Second, clk, reg)
	ctx := context.Background()

	h.checkOnce(ctx)
	if err := h.Check(ctx); err != nil {
		t.Fatalf("answering runtime: %v", err)
	}
	down := errors.New("dial unix /run/containerd/containerd.sock: connect: no such file or directory")
	rt.set(down)
	h.checkOnce(ctx)
	if got := testutil.ToFloat64(h.gauge); got != 0 {
		t.Errorf("reachable = %v after a failed check", got)
	}
	clk.Step(25 * time.Second)
	h.checkOnce(ctx)
	if err := h.Check(ctx); err != nil {
		t.Errorf("unready after 25s, within the grace: %v", err)
	}
	rt.set(nil) // a restart probed followed
	h.checkOnce(ctx)
	clk.Step(10 * time.Second)
	rt.set(down)
	h.checkOnce(ctx)
	clk.Step(29 * time.Second)
	if err := h.Check(ctx); err != nil {
		t.Errorf("the grace did not start over after an answer: %v", err)
	}
	clk.Step(time.Second)
	err := h.Check(ctx)
	if err == nil || !errors.Is(err, down) || !strings.Contains(err.Error(), "unreachable for 30s") {
		t.Fatalf("after 30s unanswered: %v; want the runtime's error", err)
	}
	rt.set(nil)
	h.checkOnce(ctx)
	if err := h.Check(ctx); err != nil || testutil.ToFloat64(h.gauge) != 1 {
		t.Errorf("after the runtime answers again: %v, reachable %v", err, testutil.ToFloat64(h.gauge))
	}
}

// Run checks at once, then every interval, until its context ends.
func TestHealthRunChecksEveryInterval(t *testing.T) {
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(epoch)
	rt := &flakyRuntime{}
	h := NewHealth(rt, time.Second, 3*time.Second, clk, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	// The check at once: the runtime answers.
	for h.Check(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatal("never ready with the runtime up")
		}
		time.Sleep(time.Millisecond)
	}
	rt.set(errors.New("down"))
	downAt := clk.Now()
	for h.Check(ctx) == nil {
		if time.Now().After(deadline) {
			t.Fatal("never unready with the runtime down")
		}
		if clk.HasWaiters() {
			clk.Step(time.Second)
		}
		time.Sleep(time.Millisecond)
	}
	if got := clk.Since(downAt); got < 3*time.Second {
		t.Errorf("unready after %v of fake time; want the 3s grace", got)
	}
	cancel()
	<-done
}

// A runtime that has never answered is not ready, from the start and for
// as long as it does not answer: the grace is for a runtime that answered
// before (a restart), not for one probed never reached (a wrong socket).
// Its first answer makes probed ready at once.
func TestHealthNotReadyUntilFirstAnswer(t *testing.T) {
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(epoch)
	down := errors.New("dial unix /run/containerd/containerd.sock: connect: no such file or directory")
	rt := &flakyRuntime{err: down}
	h := NewHealth(rt, 5*time.Second, 30*time.Second, clk, nil)
	ctx := context.Background()

	if err := h.Check(ctx); err == nil || !strings.Contains(err.Error(), "not checked") {
		t.Errorf("before the first check: %v; want not ready, not checked yet", err)
	}
	if got := testutil.ToFloat64(h.gauge); got != 0 {
		t.Errorf("reachable = %v before the first check, want 0", got)
	}
	h.checkOnce(ctx)
	err := h.Check(ctx)
	if err == nil || !errors.Is(err, down) || !strings.Contains(err.Error(), "has not answered since probed started") {
		t.Fatalf("never answered, at once: %v; want not ready with the runtime's error", err)
	}
	clk.Step(5 * time.Second)
	h.checkOnce(ctx)
	if err := h.Check(ctx); err == nil {
		t.Error("never answered, 5s in: ready")
	}
	rt.set(nil)
	h.checkOnce(ctx)
	if err := h.Check(ctx); err != nil || testutil.ToFloat64(h.gauge) != 1 {
		t.Fatalf("after the first answer: %v, reachable %v", err, testutil.ToFloat64(h.gauge))
	}
	// From now on a failure has the grace.
	rt.set(down)
	h.checkOnce(ctx)
	if err := h.Check(ctx); err != nil {
		t.Errorf("a blip after the first answer made probed unready: %v", err)
	}
}
