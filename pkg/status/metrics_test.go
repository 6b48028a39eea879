package status

import (
	"testing"

	"github.com/probed-dev/probed/internal/metricstest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every outcome is on the page from the start, at zero.
func TestMetricsOutcomesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	if n, err := testutil.GatherAndCount(reg, "probed_status_writes_total"); err != nil || n != 5 {
		t.Errorf("probed_status_writes_total has %d series (%v), want 5", n, err)
	}
}

// The status metrics pass the Prometheus metric linter: promlint in process,
// and `promtool check metrics` when it is installed.
func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.write(OutcomeSuccess, 0.01)
	m.write(OutcomeError, 0.5)
	m.write(OutcomeDryRun, -1)
	m.setPending(3)
	metricstest.Lint(t, reg)
}
