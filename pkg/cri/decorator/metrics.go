package decorator

import (
	"errors"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/prometheus/client_golang/prometheus"
)

// Exec outcomes, the `outcome` label of probed_runtime_exec_total.
const (
	OutcomeSuccess     = "success"      // exit code 0
	OutcomeNonzeroExit = "nonzero_exit" // ran, exit code != 0
	OutcomeTimeout     = "timeout"      // the command ran out of its timeout
	OutcomeError       = "error"        // could not run: no container, runtime down, ...
	// OutcomeQueueTimeout: no exec slot freed within the probe's timeout,
	// or the node's output budget stayed spent (OutputBudgetError); the
	// probe's result is thrown away.
	OutcomeQueueTimeout = "queue_timeout"
)

// Metrics are the runtime client's Prometheus metrics. A nil *Metrics records nothing.
//
//	probed_runtime_exec_total{runtime,outcome}       counter: exec calls by outcome
//	probed_runtime_exec_duration_seconds{runtime}    histogram: exec time in the runtime, queueing excluded
//	probed_runtime_exec_queue_wait_seconds           histogram: time waiting for an exec slot
//	probed_runtime_exec_in_flight                    gauge: execs running in the runtime now
//	probed_runtime_exec_slot_yields_total            counter: execs that gave up their slot after the hold limit while others waited
//	probed_runtime_exec_shared_total                 counter: execs answered by an identical run in flight
//	probed_runtime_stops_total{runtime,outcome}      counter: container stops, outcome success or error
//	probed_runtime_stop_duration_seconds             histogram: time to stop a container, grace included
//	probed_runtime_owner_refusals_total{op}          counter: execs and stops refused because the container is not the caller's
type Metrics struct {
	execTotal    *prometheus.CounterVec
	execDuration *prometheus.HistogramVec
	queueWait    prometheus.Histogram
	inFlight     prometheus.Gauge
	yields       prometheus.Counter
	shared       prometheus.Counter
	stopsTotal   *prometheus.CounterVec
	stopDuration prometheus.Histogram
	refusals     *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
// It panics if they are already registered there, like MustRegister.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		execTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probed_runtime_exec_total",
			Help: "Exec calls into the container runtime, by runtime and outcome (success, nonzero_exit, timeout, error, queue_timeout).",
		}, []string{"runtime", "outcome"}),
		execDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "probed_runtime_exec_duration_seconds",
			Help:    "Time an exec spent in the container runtime, excluding the wait for an exec slot.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14), // 5ms .. 41s
		}, []string{"runtime"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "probed_runtime_exec_queue_wait_seconds",
			Help:    "Time an exec waited for one of the node's exec slots.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9), // 1ms .. 65s
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "probed_runtime_exec_in_flight",
			Help: "Execs running in the container runtime now.",
		}),
		yields: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probed_runtime_exec_slot_yields_total",
			Help: "Execs that gave up their exec slot after --exec-slot-max-hold while other execs waited, and ran on without it.",
		}),
		shared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probed_runtime_exec_shared_total",
			Help: "Exec probes answered by an identical exec already running in the same container (--exec-share-runs), instead of running their own.",
		}),
		stopsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probed_runtime_stops_total",
			Help: "Container stops through the runtime, by runtime and outcome (success, error).",
		}, []string{"runtime", "outcome"}),
		stopDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "probed_runtime_stop_duration_seconds",
			Help:    "Time to stop a container, grace period included.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12), // 50ms .. 102s
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probed_runtime_owner_refusals_total",
			Help: "Execs (op exec) and stops (op stop) refused and never run because the runtime's container is not the pod container the probe serves: its ID in the pod's status points elsewhere.",
		}, []string{"op"}),
	}
	// Both series exist from the start, so an alert on their increase
	// sees the first refusal.
	m.refusals.WithLabelValues("exec")
	m.refusals.WithLabelValues("stop")
	if reg != nil {
		reg.MustRegister(m.execTotal, m.execDuration, m.queueWait, m.inFlight, m.yields, m.shared, m.stopsTotal, m.stopDuration, m.refusals)
	}
	return m
}

// observeOwnerRefusal counts a refused call; op is Verified's verb.
func (m *Metrics) observeOwnerRefusal(op string) {
	if m == nil {
		return
	}
	label := "exec"
	if op == opStop {
		label = "stop"
	}
	m.refusals.WithLabelValues(label).Inc()
}

func (m *Metrics) observeQueueWait(d time.Duration) {
	if m != nil {
		m.queueWait.Observe(d.Seconds())
	}
}

// observeSlotYield counts a slot given up; safe on a nil *Metrics.
func (m *Metrics) observeSlotYield() {
	if m != nil {
		m.yields.Inc()
	}
}

func (m *Metrics) addInFlight(delta float64) {
	if m != nil {
		m.inFlight.Add(delta)
	}
}

func (m *Metrics) observeShared() {
	if m != nil {
		m.shared.Inc()
	}
}

func (m *Metrics) observeExec(runtime, outcome string, d time.Duration, ran bool) {
	if m == nil {
		return
	}
	m.execTotal.WithLabelValues(runtime, outcome).Inc()
	if ran {
		m.execDuration.WithLabelValues(runtime).Observe(d.Seconds())
	}
}

func (m *Metrics) observeStop(runtime string, err error, d time.Duration) {
	if m == nil {
		return
	}
	outcome := OutcomeSuccess
	if err != nil {
		outcome = OutcomeError
	}
	m.stopsTotal.WithLabelValues(runtime, outcome).Inc()
	m.stopDuration.Observe(d.Seconds())
}

// execOutcome maps an exec result to its outcome label.
func execOutcome(exitCode int, err error) string {
	switch {
	case err == nil && exitCode == 0:
		return OutcomeSuccess
	case err == nil:
		return OutcomeNonzeroExit
	case cri.IsTimeout(err):
		return OutcomeTimeout
	case isThrottled(err):
		return OutcomeQueueTimeout
	}
	return OutcomeError
}

// isThrottled: err is probed's own limit (Throttled() == true).
func isThrottled(err error) bool {
	var t interface{ Throttled() bool }
	return errors.As(err, &t) && t.Throttled()
}
