package worker

import (
	"sync/atomic"

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
	// lateObs caches the lateness series per probe type (never deleted),
	// made on a type's first tick.
	lateObs [3]atomic.Pointer[prometheus.Observer]
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
	// The order matches series.lv, so a worker passes its label values
	// without building a slice per probe; exposition sorts labels by name.
	totalLabels := []string{"probe_type", "container", "pod", "namespace", "result"}
	if m.podUID {
		totalLabels = []string{"probe_type", "container", "pod", "namespace", "pod_uid", "result"}
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

// series is one worker's label values, fixed when the worker is created:
// probe_type, container, pod, namespace, pod_uid, and a slot for the result
// that only the worker's goroutine writes.
type series struct {
	lv [6]string
	// total (by result: unknown, success, failure) and dur are the
	// worker's children of prober_probe_total and prober_probe_duration_seconds,
	// bound on first use so that a tick does not hash its label values.
	total [3]prometheus.Counter
	dur   prometheus.Observer
}

func newSeries(t prober.ProbeType, container, pod, namespace, podUID string) series {
	return series{lv: [6]string{t.String(), container, pod, namespace, podUID}}
}

func (s *series) probeType() string { return s.lv[0] }

// totalLabels returns prober_probe_total's label values for result.
func (m *Metrics) totalLabels(s *series, result string) []string {
	if m.podUID {
		s.lv[5] = result
		return s.lv[:6]
	}
	s.lv[4] = result
	return s.lv[:5]
}

// observeProbe counts a result and, as the kubelet, times only successful and
// unknown ones.
func (m *Metrics) observeProbe(s *series, r results.Result, seconds float64) {
	if m == nil {
		return
	}
	i := int(r - results.Unknown)
	if i < 0 || i >= len(s.total) {
		m.probeTotal.WithLabelValues(m.totalLabels(s, r.MetricLabel())...).Inc()
		return
	}
	if s.total[i] == nil {
		s.total[i] = m.probeTotal.WithLabelValues(m.totalLabels(s, r.MetricLabel())...)
	}
	s.total[i].Inc()
	if r != results.Failure {
		if s.dur == nil {
			s.dur = m.probeDuration.WithLabelValues(s.lv[:4]...)
		}
		s.dur.Observe(seconds)
	}
}

// deleteSeries drops the worker's per-pod series.
func (m *Metrics) deleteSeries(s *series) {
	if m == nil {
		return
	}
	for _, r := range []results.Result{results.Success, results.Failure, results.Unknown} {
		m.probeTotal.DeleteLabelValues(m.totalLabels(s, r.MetricLabel())...)
	}
	m.probeDuration.DeleteLabelValues(s.lv[:4]...)
	s.total, s.dur = [3]prometheus.Counter{}, nil
}

func (m *Metrics) workerDelta(s *series, d float64) {
	if m == nil {
		return
	}
	m.workers.WithLabelValues(s.probeType()).Add(d)
}

func (m *Metrics) observeLateness(s *series, seconds float64) {
	if m == nil {
		return
	}
	i := 0
	switch s.probeType() {
	case "Readiness":
		i = 1
	case "Startup":
		i = 2
	}
	o := m.lateObs[i].Load()
	if o == nil {
		obs := m.lateness.WithLabelValues(s.probeType())
		m.lateObs[i].CompareAndSwap(nil, &obs)
		o = m.lateObs[i].Load()
	}
	(*o).Observe(seconds)
}

func (m *Metrics) countPanic(s *series) {
	if m == nil {
		return
	}
	m.panics.WithLabelValues(s.probeType()).Inc()
}

func (m *Metrics) countKill(s *series, outcome string) {
	if m == nil {
		return
	}
	m.kills.WithLabelValues(s.probeType(), outcome).Inc()
}
