package manager

import (
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/status"
)

// ReasonMissingReadinessGate is the Warning raised on a pod whose probed
// readiness or startup probe cannot reach its Ready condition: without the
// probed.io/ready readiness gate the kubelet ignores probed's conditions,
// so the probe silently does nothing for Services.
const ReasonMissingReadinessGate = "MissingReadinessGate"

// Metrics are the manager's own metrics. A nil *Metrics records nothing.
//
//	probed_pods_without_readiness_gate  gauge: pods with a probed readiness
//	                                    or startup probe but no probed.io/ready gate
//	probed_probes_unapproved_reach      gauge: probes not run because
//	                                    probed.io/approved-reach does not cover them
//	probed_pods_with_probe_parity_warnings{reason}  gauge: pods whose annotation
//	                                    declares a probe probed runs unlike the kubelet
type Metrics struct {
	ungated    prometheus.Gauge
	unapproved prometheus.Gauge
	// parity is probed_pods_with_probe_parity_warnings (parity.go).
	parity *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{ungated: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "probed_pods_without_readiness_gate",
		Help: "Pods on the node with a probed readiness or startup probe but no probed.io/ready readiness gate: their probes do not reach the pod's Ready condition.",
	}), unapproved: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "probed_probes_unapproved_reach",
		Help: "Probes on the node not run because what they run or where they connect changed without approval: probed.io/approved-reach does not cover them (each raises an InvalidProbe Warning).",
	}), parity: newParityGauge()}
	if reg != nil {
		reg.MustRegister(m.ungated, m.unapproved, m.parity)
	}
	return m
}

func (m *Metrics) setUnapproved(n int) {
	if m != nil {
		m.unapproved.Set(float64(n))
	}
}

func (m *Metrics) setUngated(n int) {
	if m != nil {
		m.ungated.Set(float64(n))
	}
}

// gatingContainers lists, sorted, the containers whose declared probes
// would gate the pod's readiness (readiness and startup probes).
func gatingContainers(declared []probespec.DeclaredProbe) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range declared {
		if (d.Type == probespec.Readiness || d.Type == probespec.Startup) && !seen[d.Container.Name] {
			seen[d.Container.Name] = true
			out = append(out, d.Container.Name)
		}
	}
	sort.Strings(out)
	return out
}

func hasProbedGate(pod *v1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == status.PodReadyCondition {
			return true
		}
	}
	return false
}

// checkGateLocked notes whether the pod lacks the gate its probes need
// (conditions mode only: in container-status mode probed writes ready
// itself) and reports whether a Warning is due: once per pod, as a pod's
// readiness gates never change.
//
// A mirror pod is never ungated: the kubelet reads a static pod's
// readiness gates from the static pod it was given, never from its mirror,
// where probed writes, so the gate would keep the static pod from ever
// becoming Ready. The Warning would steer there.
func (m *Manager) checkGateLocked(pod *v1.Pod, e *podEntry, declared []probespec.DeclaredProbe) (warn bool, containers []string) {
	if !m.opts.RequireReadinessGate || pod.Annotations[v1.MirrorPodAnnotationKey] != "" {
		return false, nil
	}
	containers = gatingContainers(declared)
	e.ungated = len(containers) > 0 && !hasProbedGate(pod)
	warn = e.ungated && !e.gateWarned
	if warn {
		e.gateWarned = true
	}
	return warn, containers
}

func (m *Manager) reportMissingGate(pod *v1.Pod, containers []string) {
	msg := fmt.Sprintf("probed runs readiness or startup probes for container(s) %s, but the pod has no %q readiness gate, so their results never reach the pod's Ready condition or its Services; add spec.readinessGates: [{conditionType: %s}]",
		strings.Join(containers, ", "), status.PodReadyCondition, status.PodReadyCondition)
	klog.InfoS("Pod without probed's readiness gate", "pod", klog.KObj(pod), "containers", containers)
	if m.opts.Recorder != nil {
		m.opts.Recorder.Event(pod, "", v1.EventTypeWarning, ReasonMissingReadinessGate, msg)
	}
}

// countUngatedLocked updates the gauge from every tracked pod.
func (m *Manager) countUngatedLocked() {
	n := 0
	for _, e := range m.pods {
		if e.ungated {
			n++
		}
	}
	m.opts.Metrics.setUngated(n)
}
