package podinformer

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the pod source's: which one probed reads, and how the
// kubelet's Pods API has been answering.
type Metrics struct {
	info    *prometheus.GaugeVec
	errors  *prometheus.CounterVec
	watches prometheus.Counter
}

// NewMetrics registers them with reg (none when nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "probed_pod_source_info",
			Help: "Where probed reads its node's pods: 1 for source=\"kubelet\" (the kubelet's Pods API) or source=\"apiserver\" (a watch of the API server).",
		}, []string{"source"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probed_pod_source_errors_total",
			Help: "Calls to the kubelet's Pods API that failed and watches of it that ended, by gRPC code (FailedPrecondition: the kubelet's pod sources are syncing; ResourceExhausted: the kubelet ended the watch, as it does for a watcher that fell behind and for every watcher when it shuts down; Unavailable: no kubelet answers; Decode: a pod probed could not read).",
		}, []string{"code"}),
		watches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probed_pod_source_watches_total",
			Help: "WatchPods streams probed opened on the kubelet's Pods API: one at start, one per relist period, and one after each failure.",
		}),
	}
	// The codes the kubelet's Pods API is documented to answer, at 0 from
	// the start, so that a rate or an alert over them has a series.
	for _, c := range knownCodes {
		m.errors.WithLabelValues(c)
	}
	if reg != nil {
		reg.MustRegister(m.info, m.errors, m.watches)
	}
	return m
}

// knownCodes are the gRPC codes the Pods API answers (pkg/kubelet/apis/pods)
// and the one probed adds for a pod it cannot read.
var knownCodes = []string{"FailedPrecondition", "ResourceExhausted", "Unavailable", "Unimplemented", "Decode"}

// SetSource records the source probed reads.
func (m *Metrics) SetSource(s Source) {
	m.info.Reset()
	m.info.WithLabelValues(string(s)).Set(1)
}
