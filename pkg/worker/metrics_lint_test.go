package worker

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/probed-dev/probed/internal/metricstest"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// Every worker metric, with every label in use, passes the Prometheus
// metric linter: promlint in process, and `promtool check metrics` (the same
// rules, as the Prometheus release ships them) when it is installed.
func TestMetricsLint(t *testing.T) {
	for _, opts := range [][]MetricsOption{nil, {WithoutPodUIDLabel()}} {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg, opts...)
		for _, pt := range []probespec.ProbeType{probespec.Liveness, probespec.Readiness, probespec.Startup} {
			s := newSeries(pt, "app", "pod", "ns", "uid")
			m.workerDelta(&s, 1)
			for _, r := range []results.Result{results.Success, results.Failure, results.Unknown} {
				m.observeProbe(&s, r, 0.01)
			}
			m.observeLateness(&s, 0.002)
			m.countPanic(&s)
			m.countKill(&s, KillOutcomeSuccess)
			m.countKill(&s, KillOutcomeError)
		}
		metricstest.Lint(t, reg)
	}
}

// The node-level counters and the worker gauge are on the page from the
// start, at zero, so rate() and increase() see their first increment.
func TestMetricsNodeSeriesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	for name, want := range map[string]int{
		"probed_workers":               3, // Liveness, Readiness, Startup
		"probed_probe_panics_total":    3,
		"probed_container_kills_total": 6, // Liveness and Startup × success, error, deferred
		"prober_probe_total":           0, // per pod: only with a worker
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
}
