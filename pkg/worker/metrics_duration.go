package worker

import (
	"fmt"
	"strings"
)

// DurationSeries says how prober_probe_duration_seconds is broken down
// (--metrics-probe-duration). Its 14 series per worker are most of a node's
// series; on a fleet they are millions, so an operator can fold them into one
// histogram per namespace and probe type, or drop them.
type DurationSeries int

const (
	// DurationPerPod is the kubelet's histogram: probe_type, container, pod,
	// namespace. The default, as the contract has it.
	DurationPerPod DurationSeries = iota
	// DurationPerNamespace keeps probe_type and namespace only. A deleted
	// worker's observations stay in its namespace's histogram while any
	// worker of that namespace and probe type lives, so it only rises.
	DurationPerNamespace
	// DurationNone exposes no duration histogram and times nothing.
	DurationNone
)

// durationSeriesNames are the flag's spellings, by DurationSeries.
var durationSeriesNames = [...]string{"pod", "namespace", "none"}

// DurationSeriesValues lists the accepted spellings, the default first.
func DurationSeriesValues() []string { return durationSeriesNames[:] }

func (d DurationSeries) String() string {
	if d < 0 || int(d) >= len(durationSeriesNames) {
		return fmt.Sprintf("DurationSeries(%d)", int(d))
	}
	return durationSeriesNames[d]
}

// ParseDurationSeries reads a --metrics-probe-duration value.
func ParseDurationSeries(s string) (DurationSeries, error) {
	for i, n := range durationSeriesNames {
		if s == n {
			return DurationSeries(i), nil
		}
	}
	return 0, fmt.Errorf("%q: must be one of %s", s, strings.Join(durationSeriesNames[:], ", "))
}

// WithDurationSeries sets how prober_probe_duration_seconds is broken down;
// the default is DurationPerPod.
func WithDurationSeries(d DurationSeries) MetricsOption {
	return func(m *Metrics) { m.perPod.durMode = d }
}
