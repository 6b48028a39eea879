package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/results"
)

// Kill outcomes, the "outcome" label of probed_container_kills_total.
const (
	KillOutcomeSuccess = "success"
	KillOutcomeError   = "error"
)

// Metrics holds the worker metrics. Create one per registry with NewMetrics;
// there are no package globals, so tests and embedders get a clean set. A nil
// *Metrics records nothing.
//
//   - prober_probe_total{probe_type,result,container,pod,namespace,pod_uid}:
//     counter of probe results, as the kubelet's (errored probes not counted).
//   - prober_probe_duration_seconds{probe_type,container,pod,namespace}:
//     histogram of probe durations, observed for successful and unknown
//     results only, as the kubelet does; the kubelet's default buckets.
//   - probed_workers{probe_type}: gauge of running workers.
//   - probed_probe_lateness_seconds{probe_type}: histogram of how late a
//     periodic probe started against its scheduled tick.
//   - probed_probe_panics_total{probe_type}: counter of recovered panics.
//   - probed_container_kills_total{probe_type,outcome}: counter of container
//     kills after a liveness or startup failure; outcome is success or error.
//
// The per-pod series of a worker are deleted when the worker ends. The
// node-level counters and probed_workers are present at zero from the start
// (kills for liveness and startup only); the lateness histogram appears with a
// probe type's first periodic tick.
type Metrics struct {
	probeTotal    *prometheus.CounterVec
	probeDuration *prometheus.HistogramVec
	workers       *prometheus.GaugeVec
	lateness      *prometheus.HistogramVec
	panics        *prometheus.CounterVec
	kills         *prometheus.CounterVec
	podUID        bool
}

// MetricsOption changes NewMetrics' defaults.
type MetricsOption func(*Metrics)

// WithoutPodUIDLabel drops pod_uid from prober_probe_total to bound its
// cardinality. Series are then shared by pods with the same namespace and
// name, so a pod recreated under the same name may see its counter deleted
// when the old pod's worker ends.
func WithoutPodUIDLabel() MetricsOption {
	return func(m *Metrics) { m.podUID = false }
}

// latenessBuckets span a scheduler hiccup (1ms) to a whole missed period.
var latenessBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// NewMetrics creates the worker metrics and registers them with reg (unless
// reg is nil). It panics if they are already registered there.
func NewMetrics(reg prometheus.Registerer, opts ...MetricsOption) *Metrics {
	m := &Metrics{podUID: true}
	for _, o := range opts {
		o(m)
	}
	totalLabels := []string{"probe_type", "result", "container", "pod", "namespace"}
	if m.podUID {
		totalLabels = append(totalLabels, "pod_uid")
	}
	m.probeTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "prober",
		Name:      "probe_total",
		Help:      "Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, totalLabels)
	m.probeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "prober",
		Name:      "probe_duration_seconds",
		Help:      "Duration in seconds for a probe response.",
		Buckets:   prometheus.DefBuckets, // the kubelet sets none, so gets these
	}, []string{"probe_type", "container", "pod", "namespace"})
	m.workers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "probed_workers",
		Help: "Number of running probe workers by probe type.",
	}, []string{"probe_type"})
	m.lateness = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "probed_probe_lateness_seconds",
		Help:    "How late a periodic probe started against its scheduled tick.",
		Buckets: latenessBuckets,
	}, []string{"probe_type"})
	m.panics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "probed_probe_panics_total",
		Help: "Panics recovered in probe workers; the worker went on.",
	}, []string{"probe_type"})
	m.kills = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "probed_container_kills_total",
		Help: "Containers stopped after failing a liveness or startup probe, by outcome (success or error).",
	}, []string{"probe_type", "outcome"})
	// The node-level counters and gauges start at zero for every probe type
	// (and kill outcome), so they are on /metrics from the start: rate() and
	// increase() then see their first increment, and absent() never fires on
	// a healthy node. Liveness and startup are the only types that kill.
	for _, t := range []prober.ProbeType{prober.Liveness, prober.Readiness, prober.Startup} {
		m.workers.WithLabelValues(t.String())
		m.panics.WithLabelValues(t.String())
		if t != prober.Readiness {
			m.kills.WithLabelValues(t.String(), KillOutcomeSuccess)
			m.kills.WithLabelValues(t.String(), KillOutcomeError)
		}
	}
	if reg != nil {
		reg.MustRegister(m.probeTotal, m.probeDuration, m.workers, m.lateness, m.panics, m.kills)
	}
	return m
}

// series is one worker's label values, fixed when the worker is created.
type series struct {
	probeType, container, pod, namespace, podUID string
}

func newSeries(t prober.ProbeType, container, pod, namespace, podUID string) series {
	return series{t.String(), container, pod, namespace, podUID}
}

func (m *Metrics) totalLabels(s series, result string) []string {
	l := []string{s.probeType, result, s.container, s.pod, s.namespace}
	if m.podUID {
		l = append(l, s.podUID)
	}
	return l
}

// observeProbe counts a result and, as the kubelet, times only successful and
// unknown ones.
func (m *Metrics) observeProbe(s series, r results.Result, seconds float64) {
	if m == nil {
		return
	}
	m.probeTotal.WithLabelValues(m.totalLabels(s, r.MetricLabel())...).Inc()
	if r != results.Failure {
		m.probeDuration.WithLabelValues(s.probeType, s.container, s.pod, s.namespace).Observe(seconds)
	}
}

// deleteSeries drops the worker's per-pod series.
func (m *Metrics) deleteSeries(s series) {
	if m == nil {
		return
	}
	for _, r := range []results.Result{results.Success, results.Failure, results.Unknown} {
		m.probeTotal.DeleteLabelValues(m.totalLabels(s, r.MetricLabel())...)
	}
	m.probeDuration.DeleteLabelValues(s.probeType, s.container, s.pod, s.namespace)
}

func (m *Metrics) workerDelta(s series, d float64) {
	if m == nil {
		return
	}
	m.workers.WithLabelValues(s.probeType).Add(d)
}

func (m *Metrics) observeLateness(s series, seconds float64) {
	if m == nil {
		return
	}
	m.lateness.WithLabelValues(s.probeType).Observe(seconds)
}

func (m *Metrics) countPanic(s series) {
	if m == nil {
		return
	}
	m.panics.WithLabelValues(s.probeType).Inc()
}

func (m *Metrics) countKill(s series, outcome string) {
	if m == nil {
		return
	}
	m.kills.WithLabelValues(s.probeType, outcome).Inc()
}
