package decorator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults for Health.
const (
	DefaultHealthInterval = 5 * time.Second
	// DefaultHealthGrace is how long the runtime may go unanswered before
	// probed reports itself not ready: longer than a containerd restart,
	// short enough that one that probed cannot follow shows.
	DefaultHealthGrace = 30 * time.Second
)

// Health watches whether the container runtime answers. It promises that:
//   - probed is not ready until the runtime has answered once: one it never
//     reached (a wrong socket, a runtime not started) is reported at once,
//     with the last error;
//   - after that first answer, a blip (a restart of containerd that probed
//     follows, one slow answer) never makes probed unready;
//   - a runtime unreachable for Grace or longer does, with the last error,
//     until it answers again;
//   - probed_runtime_reachable says, at every check, whether it answered.
//
// Without it a runtime probed has lost (its socket replaced under a file
// bind mount) left exec probes and kills failing behind a green /readyz.
type Health struct {
	ready    func(context.Context) error
	clock    clock.WithTicker
	interval time.Duration
	grace    time.Duration
	gauge    prometheus.Gauge

	mu sync.Mutex
	// answered: the runtime has answered a check since probed started.
	answered bool
	// checked: at least one check has ended.
	checked bool
	// failingSince is when the current run of failed checks began; zero
	// while the runtime answers.
	failingSince time.Time
	lastErr      error
}

// NewHealth watches rt every interval and reports it unready after grace
// without an answer (defaults when <= 0). clk nil is the real clock; reg may
// be nil. Until the runtime first answers, it counts as unreachable.
func NewHealth(rt cri.Runtime, interval, grace time.Duration, clk clock.WithTicker, reg prometheus.Registerer) *Health {
	if interval <= 0 {
		interval = DefaultHealthInterval
	}
	if grace <= 0 {
		grace = DefaultHealthGrace
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	h := &Health{ready: rt.Ready, clock: clk, interval: interval, grace: grace,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "probed_runtime_reachable",
			Help: "1 if the container runtime answered probed's last check, 0 if not.",
		})}
	if reg != nil {
		reg.MustRegister(h.gauge)
	}
	return h
}

// Run checks the runtime until ctx ends.
func (h *Health) Run(ctx context.Context) {
	t := h.clock.NewTicker(h.interval)
	defer t.Stop()
	for {
		h.checkOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func (h *Health) checkOnce(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, h.interval)
	err := h.ready(cctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checked = true
	switch {
	case err == nil && !h.answered:
		klog.InfoS("Container runtime answers")
		h.answered, h.failingSince, h.lastErr = true, time.Time{}, nil
	case err == nil && !h.failingSince.IsZero():
		klog.InfoS("Container runtime answers again", "after", h.clock.Since(h.failingSince).Round(time.Second))
		h.failingSince, h.lastErr = time.Time{}, nil
	case err != nil && h.failingSince.IsZero():
		klog.ErrorS(err, "Container runtime does not answer")
		h.failingSince = h.clock.Now()
	}
	if err != nil {
		h.lastErr = err
		h.gauge.Set(0)
	} else {
		h.gauge.Set(1)
	}
}

// Check is the /readyz check: nil once the runtime has answered, unless it
// has not answered since for Grace or longer.
func (h *Health) Check(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.checked:
		return errors.New("container runtime not checked yet")
	case !h.answered:
		return fmt.Errorf("container runtime has not answered since probed started: %w", h.lastErr)
	case h.failingSince.IsZero():
		return nil
	}
	if d := h.clock.Since(h.failingSince); d >= h.grace {
		return fmt.Errorf("container runtime unreachable for %v: %w", d.Round(time.Second), h.lastErr)
	}
	return nil
}
