package manager

import (
	"fmt"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Probes an annotation may declare that probed runs, but not as the kubelet
// would: adoption leaves them in the spec (probespec's adoption rules), and
// when a user declares one in probed.io/probes anyway, the daemon runs it and
// says once, per pod, what differs. (A liveness or startup probe whose kill
// would not be followed by the kubelet's restart is not run at all:
// probespec refuses it as an InvalidProbe.)
const (
	// ReasonSidecarStartupProbe: a sidecar's startup probe the kubelet does
	// not see; it counts the sidecar as started as soon as it runs, and
	// starts the next init containers and the app containers then.
	ReasonSidecarStartupProbe = "SidecarStartupProbe"
)

// parityMetricReasons are the reason label values of
// probed_pods_with_probe_parity_warnings, by event reason.
var parityMetricReasons = map[string]string{
	ReasonSidecarStartupProbe: "sidecar_startup_probe",
}

// parityWarning is one such probe's warning.
type parityWarning struct {
	container string
	reason    string
	message   string
}

// parityWarnings returns the warnings the pod's annotation-declared probes
// call for, in declared order.
func parityWarnings(declared []probespec.DeclaredProbe) []parityWarning {
	var out []parityWarning
	for _, d := range declared {
		if d.FromAnnotation && d.InitContainer && d.Type == probespec.Startup {
			out = append(out, parityWarning{d.Container.Name, ReasonSidecarStartupProbe, fmt.Sprintf(
				"sidecar %s: its startupProbe in %s is probed's, which the kubelet does not see: the kubelet counts the sidecar as started as soon as it runs, "+
					"and starts the next init containers and the app containers then; keep it in the pod spec to keep the start-up order",
				d.Container.Name, probespec.ProbesAnnotation)})
		}
	}
	return out
}

// checkParityLocked records the pod's parity warnings and returns those not
// raised for it yet: each reason once per container for the pod's life.
func (m *Manager) checkParityLocked(pod *v1.Pod, e *podEntry, declared []probespec.DeclaredProbe) []parityWarning {
	warnings := parityWarnings(declared)
	e.parity = map[string]bool{}
	var due []parityWarning
	for _, w := range warnings {
		e.parity[w.reason] = true
		key := w.container + "/" + w.reason
		if e.parityWarned[key] {
			continue
		}
		if e.parityWarned == nil {
			e.parityWarned = map[string]bool{}
		}
		e.parityWarned[key] = true
		due = append(due, w)
	}
	return due
}

func (m *Manager) reportParity(pod *v1.Pod, warnings []parityWarning) {
	for _, w := range warnings {
		klog.InfoS("Probe probed runs unlike the kubelet", "pod", klog.KObj(pod), "container", w.container, "reason", w.reason, "detail", w.message)
		if m.opts.Recorder != nil {
			m.opts.Recorder.Event(pod, w.container, v1.EventTypeWarning, w.reason, w.message)
		}
	}
}

// countParityLocked updates the gauge from every tracked pod.
func (m *Manager) countParityLocked() {
	if m.opts.Metrics == nil {
		return
	}
	counts := map[string]int{}
	for _, e := range m.pods {
		for reason := range e.parity {
			counts[reason]++
		}
	}
	reasons := make([]string, 0, len(parityMetricReasons))
	for r := range parityMetricReasons {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		m.opts.Metrics.parity.WithLabelValues(parityMetricReasons[r]).Set(float64(counts[r]))
	}
}

// newParityGauge is probed_pods_with_probe_parity_warnings.
func newParityGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "probed_pods_with_probe_parity_warnings",
		Help: "Pods on the node whose probed.io/probes annotation declares a probe probed runs unlike the kubelet, by reason: " +
			"sidecar_startup_probe (a sidecar's startup probe the kubelet's start-up order does not wait for).",
	}, []string{"reason"})
}
