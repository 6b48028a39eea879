package status

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a status write, the values of probed_status_writes_total's
// outcome label.
const (
	// OutcomeSuccess: the API server accepted the write.
	OutcomeSuccess = "success"
	// OutcomeError: the write failed (API server error or unreachable); it
	// is retried with backoff.
	OutcomeError = "error"
	// OutcomeConflict: the object changed since it was read
	// (container-status mode); it is re-read and retried at once.
	OutcomeConflict = "conflict"
	// OutcomeNotFound: the pod is gone; it is dropped.
	OutcomeNotFound = "not_found"
	// OutcomeDryRun: with --dry-run, a write that would have been sent.
	OutcomeDryRun = "dry_run"
)

// Metrics are the status writer's Prometheus metrics. Create them with
// NewMetrics; a nil *Metrics records nothing.
//
//   - probed_status_writes_total{outcome}: status write attempts by outcome
//     (see the Outcome constants). An attempt is one apply or patch request,
//     or, in container-status mode, a failed read before it. A write found
//     unnecessary is not counted.
//   - probed_status_write_duration_seconds: latency of the apply and patch
//     requests (reads and dry-run writes are not timed).
//   - probed_status_pending_pods: pods whose desired status has not been
//     written yet, including those waiting to retry.
type Metrics struct {
	writes   *prometheus.CounterVec
	duration prometheus.Histogram
	pending  prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg, unless reg is
// nil. It panics if they are already registered there.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probed_status_writes_total",
			Help: "Pod status writes by outcome: success, error, conflict, not_found, dry_run.",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "probed_status_write_duration_seconds",
			Help:    "Latency of pod status write requests to the API server.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "probed_status_pending_pods",
			Help: "Pods whose desired status has not been written yet, including those waiting to retry.",
		}),
	}
	for _, o := range []string{OutcomeSuccess, OutcomeError, OutcomeConflict, OutcomeNotFound, OutcomeDryRun} {
		m.writes.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.writes, m.duration, m.pending)
	}
	return m
}

// write counts one write by outcome and, when seconds ≥ 0, observes its
// request's latency.
func (m *Metrics) write(outcome string, seconds float64) {
	if m == nil {
		return
	}
	m.writes.WithLabelValues(outcome).Inc()
	if seconds >= 0 {
		m.duration.Observe(seconds)
	}
}

func (m *Metrics) setPending(n int) {
	if m == nil {
		return
	}
	m.pending.Set(float64(n))
}
