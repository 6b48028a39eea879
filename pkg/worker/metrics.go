package worker

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Kill outcomes, the "outcome" label of probed_container_kills_total.
const (
	KillOutcomeSuccess = "success"
	KillOutcomeError   = "error"
	// KillOutcomeDeferred: held back by the restart budget or the workload
	// guard, by design; retried later.
	KillOutcomeDeferred = "deferred"
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
//     WithDurationSeries folds it to {probe_type,namespace} or drops it.
//   - probed_workers{probe_type}: gauge of running workers.
//   - probed_probe_lateness_seconds{probe_type}: histogram of how late a
//     periodic probe started against its scheduled tick.
//   - probed_probe_panics_total{probe_type}: counter of recovered panics.
//   - probed_container_kills_total{probe_type,outcome}: counter of container
//     kills after a liveness or startup failure; outcome is success or error.
//   - probed_probe_certificate_expiry_timestamp_seconds{probe_type,container,
//     pod,namespace,certificate}: when the certificates a probe with
//     probed.io/tls depends on expire (metrics_tls.go).
//
// The per-pod series of a worker are deleted when the worker ends. The
// node-level counters and probed_workers are present at zero from the start
// (kills for liveness and startup only); the lateness histogram appears with a
// probe type's first periodic tick.
type Metrics struct {
	// probeTotal and probeDuration collect the workers' own counts (see
	// seriesSet): a CounterVec and HistogramVec child cost about 2 KiB per
	// worker, more than the rest of an idle worker.
	probeTotal    prometheus.Collector
	probeDuration prometheus.Collector
	perPod        seriesSet
	workers       *prometheus.GaugeVec
	lateness      *prometheus.HistogramVec
	panics        *prometheus.CounterVec
	kills         *prometheus.CounterVec
	tlsExpiry     *tlsExpiry
	podUID        bool
	// lateObs caches the lateness series per probe type (never deleted),
	// made on a type's first tick.
	lateObs [3]atomic.Pointer[prometheus.Observer]
}

// MetricsOption changes NewMetrics' defaults.
type MetricsOption func(*Metrics)

// WithoutPodUIDLabel drops pod_uid from prober_probe_total to bound its
// cardinality. Series are then shared by pods with the same namespace and
// name, so a pod recreated under the same name may see its counter reset
// when the old pod's worker ends.
func WithoutPodUIDLabel() MetricsOption {
	return func(m *Metrics) { m.podUID = false }
}

// latenessBuckets span a scheduler hiccup (1ms) to a whole missed period.
var latenessBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// NewMetrics creates the worker metrics and registers them with reg (unless
// reg is nil). It panics if they are already registered there.
func NewMetrics(reg prometheus.Registerer, opts ...MetricsOption) *Metrics {
	m := &Metrics{podUID: true, tlsExpiry: newTLSExpiry()}
	for _, o := range opts {
		o(m)
	}
	// The order matches series.lv, so a worker passes its label values
	// without building a slice per probe; exposition sorts labels by name.
	totalLabels := []string{"probe_type", "container", "pod", "namespace", "result"}
	if m.podUID {
		totalLabels = []string{"probe_type", "container", "pod", "namespace", "pod_uid", "result"}
	}
	m.perPod.totalDesc = prometheus.NewDesc("prober_probe_total",
		"Cumulative number of a liveness, readiness or startup probe for a container by result.",
		totalLabels, nil)
	durLabels := []string{"probe_type", "container", "pod", "namespace"}
	if m.perPod.durMode == DurationPerNamespace {
		durLabels = []string{"probe_type", "namespace"}
	}
	m.perPod.durDesc = prometheus.NewDesc("prober_probe_duration_seconds",
		"Duration in seconds for a probe response.", durLabels, nil)
	m.perPod.podUID = m.podUID
	m.perPod.live = map[*series]struct{}{}
	m.perPod.retired = map[durKey]*retiredDur{}
	m.probeTotal = familyCollector{&m.perPod, true}
	m.probeDuration = familyCollector{&m.perPod, false}
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
		Help: "Containers stopped after failing a liveness or startup probe, by outcome (success, error, or deferred by the restart budget or the workload guard).",
	}, []string{"probe_type", "outcome"})
	// The node-level counters and gauges start at zero for every probe type
	// (and kill outcome), so they are on /metrics from the start: rate() and
	// increase() then see their first increment, and absent() never fires on
	// a healthy node. Liveness and startup are the only types that kill.
	for _, t := range []probespec.ProbeType{probespec.Liveness, probespec.Readiness, probespec.Startup} {
		m.workers.WithLabelValues(t.String())
		m.panics.WithLabelValues(t.String())
		if t != probespec.Readiness {
			m.kills.WithLabelValues(t.String(), KillOutcomeSuccess)
			m.kills.WithLabelValues(t.String(), KillOutcomeError)
			m.kills.WithLabelValues(t.String(), KillOutcomeDeferred)
		}
	}
	if reg != nil {
		reg.MustRegister(m.probeTotal, m.workers, m.lateness, m.panics, m.kills, m.tlsExpiry)
		if m.perPod.durMode != DurationNone {
			reg.MustRegister(m.probeDuration)
		}
	}
	return m
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
