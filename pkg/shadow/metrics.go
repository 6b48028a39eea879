package shadow

import "github.com/prometheus/client_golang/prometheus"

// probeTypes are the probe types compared: their verdicts show in the
// kubelet's container status.
var probeTypes = []string{"Readiness", "Startup"}

// Metrics are the comparison's Prometheus metrics. Create them with
// NewMetrics; a nil *Metrics records nothing. Outside shadow mode they stay
// at 0.
//
//   - probed_shadow_disagreements{probe_type}: containers whose verdict
//     from probed has differed from the kubelet's for at least the grace,
//     now.
//   - probed_shadow_disagreements_total{probe_type}: such differences, each
//     counted once, when it has lasted the grace.
type Metrics struct {
	ongoing *prometheus.GaugeVec
	total   *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg, unless reg is
// nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ongoing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "probed_shadow_disagreements",
			Help: "In shadow mode (--dry-run --probe-source=spec), containers whose readiness or startup verdict from probed has differed from the kubelet's for at least two probe periods, now.",
		}, []string{"probe_type"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probed_shadow_disagreements_total",
			Help: "In shadow mode, differences between probed's readiness or startup verdict and the kubelet's that lasted at least two probe periods, each counted once.",
		}, []string{"probe_type"}),
	}
	for _, t := range probeTypes {
		m.ongoing.WithLabelValues(t)
		m.total.WithLabelValues(t)
	}
	if reg != nil {
		reg.MustRegister(m.ongoing, m.total)
	}
	return m
}

func (m *Metrics) counted(probeType string) {
	if m == nil {
		return
	}
	m.total.WithLabelValues(probeType).Inc()
}

func (m *Metrics) setOngoing(n map[string]int) {
	if m == nil {
		return
	}
	for _, t := range probeTypes {
		m.ongoing.WithLabelValues(t).Set(float64(n[t]))
	}
}
