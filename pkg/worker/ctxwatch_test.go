package worker

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

func watchCount(r *Watches) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

func sharing(r *Watches) func(*Config) { return func(c *Config) { c.Watches = r } }

// Workers run with one context share one watch, which goes away with the
// last of them; cancelling the context stops them all.
func TestWorkersShareOneContextWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := NewWatches()
	var ws []*Worker
	for range 3 {
		e, w := newEnv(t, probespec.Readiness, v1.Probe{}, sharing(r))
		e.pods.set(runningPod(epoch))
		go w.Run(ctx)
		recv(t, e.prober.calls, "first probe")
		ws = append(ws, w)
	}
	if n := watchCount(r); n != 1 {
		t.Fatalf("%d watches for one context, want 1", n)
	}
	cancel()
	for _, w := range ws {
		recv(t, w.Done(), "exit on cancel")
	}
	if n := watchCount(r); n != 0 {
		t.Fatalf("%d watches left after the context ended", n)
	}
}

func TestContextWatchLeftByLastWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := NewWatches()
	e, w := newEnv(t, probespec.Readiness, v1.Probe{}, sharing(r))
	e.pods.set(runningPod(epoch))
	go w.Run(ctx)
	recv(t, e.prober.calls, "first probe")
	w.Stop()
	recv(t, w.Done(), "exit")
	if n := watchCount(r); n != 0 {
		t.Fatalf("%d watches left after the last worker ended", n)
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
