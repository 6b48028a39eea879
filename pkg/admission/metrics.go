package admission

import "github.com/prometheus/client_golang/prometheus"

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

// Metrics counts admission requests by webhook (adopt, validate, approve) and
// outcome. A nil *Metrics counts nothing.
type Metrics struct {
	requests *prometheus.CounterVec
}

// NewMetrics registers the handlers' metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "probed_webhook_admissions_total",
		Help: "Admission requests answered, by webhook (adopt, validate, approve) and outcome (adopted, approved, unchanged, skipped, allowed, denied, error).",
	}, []string{"webhook", "outcome"})}
	reg.MustRegister(m.requests)
	return m
}

func (m *Metrics) observe(webhook, outcome string) {
	if m != nil {
		m.requests.WithLabelValues(webhook, outcome).Inc()
	}
}
