package worker

// DurationSeries says how prober_probe_duration_seconds is broken down
// (--metrics-probe-duration). Its 14 series per worker are most of a node's
// series; on a fleet they are millions, so an operator can fold them into one
// histogram per namespace and probe type, or drop them.
type DurationSeries string

const (
	// DurationPerPod is the kubelet's histogram: probe_type, container, pod,
	// namespace. The default, as the contract has it.
	DurationPerPod DurationSeries = "pod"
	// DurationPerNamespace keeps probe_type and namespace only. A deleted
	// worker's observations stay in its namespace's histogram while any
	// worker of that namespace and probe type lives, so it only rises.
	DurationPerNamespace DurationSeries = "namespace"
	// DurationNone exposes no duration histogram and times nothing.
	DurationNone DurationSeries = "none"
)

// DurationSeriesValues lists every DurationSeries, the default first.
func DurationSeriesValues() []DurationSeries {
	return []DurationSeries{DurationPerPod, DurationPerNamespace, DurationNone}
}

// WithDurationSeries sets how prober_probe_duration_seconds is broken down;
// the default, and what a value not listed in DurationSeriesValues means, is
// DurationPerPod.
func WithDurationSeries(d DurationSeries) MetricsOption {
	return func(m *Metrics) { m.perPod.durMode = d }
}
