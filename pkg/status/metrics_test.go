package status

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
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
	lintRegistry(t, reg)
}

// lintRegistry fails t on any finding of promlint, or of promtool if it is
// on PATH, on reg's /metrics page.
func lintRegistry(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	page := rec.Body.String()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not installed; linted with promlint only")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(page)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("promtool check metrics: %v\n%s\non:\n%s", err, out, page)
	}
}
