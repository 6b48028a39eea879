package admission

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Outcomes of one admission request, the outcome label of
// probed_webhook_admissions_total.
const (
	// OutcomeAdopted: the pod was patched.
	OutcomeAdopted = "adopted"
	// OutcomeApproved: probed.io/approved-reach was set to what the pod's
	// probes declare.
	OutcomeApproved = "approved"
	// OutcomeUnchanged: in scope, but there was nothing to move or add.
	OutcomeUnchanged = "unchanged"
	// OutcomeSkipped: out of scope (excluded namespace, probed's own pod,
	// opted out, or not a pod create).
	OutcomeSkipped = "skipped"
	// OutcomeAllowed: validated and valid.
	OutcomeAllowed = "allowed"
	// OutcomeDenied: refused, the annotation being malformed or invalid.
	OutcomeDenied = "denied"
	// OutcomeError: the request could not be decoded.
	OutcomeError = "error"
)

// Metrics counts admission requests by webhook (adopt, validate, approve,
// probe-host) and outcome. A nil *Metrics counts nothing.
type Metrics struct {
	requests   *prometheus.CounterVec
	leftProbes *prometheus.CounterVec
}

// NewMetrics registers the handlers' metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "probed_webhook_admissions_total",
		Help: "Admission requests answered, by webhook (adopt, validate, approve, probe-host) and outcome (adopted, approved, unchanged, skipped, allowed, denied, error).",
	}, []string{"webhook", "outcome"}),
		leftProbes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probed_webhook_probes_left_total",
			Help: "Spec probes the adoption webhook left with the kubelet, by probe type (liveness, readiness, startup).",
		}, []string{"probe_type"}),
	}
	reg.MustRegister(m.requests, m.leftProbes)
	return m
}

// left counts the probes adoption left with the kubelet.
func (m *Metrics) left(left []probespec.Left) {
	if m == nil {
		return
	}
	for _, l := range left {
		_, field, _ := strings.Cut(l.Probe, "/")
		m.leftProbes.WithLabelValues(strings.TrimSuffix(field, "Probe")).Inc()
	}
}

func (m *Metrics) observe(webhook, outcome string) {
	if m != nil {
		m.requests.WithLabelValues(webhook, outcome).Inc()
	}
}
