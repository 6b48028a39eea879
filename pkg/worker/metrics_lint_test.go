package worker

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

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/results"
)

// Every worker metric, with every label in use, passes the Prometheus
// metric linter: promlint in process, and `promtool check metrics` (the same
// rules, as the Prometheus release ships them) when it is installed.
func TestMetricsLint(t *testing.T) {
	for _, opts := range [][]MetricsOption{nil, {WithoutPodUIDLabel()}} {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg, opts...)
		for _, pt := range []prober.ProbeType{prober.Liveness, prober.Readiness, prober.Startup} {
			s := newSeries(pt, "app", "pod", "ns", "uid")
			m.workerDelta(s, 1)
			for _, r := range []results.Result{results.Success, results.Failure, results.Unknown} {
				m.observeProbe(s, r, 0.01)
			}
			m.observeLateness(s, 0.002)
			m.countPanic(s)
			m.countKill(s, KillOutcomeSuccess)
			m.countKill(s, KillOutcomeError)
		}
		lintRegistry(t, reg)
	}
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

// The node-level counters and the worker gauge are on the page from the
// start, at zero, so rate() and increase() see their first increment.
func TestMetricsNodeSeriesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	for name, want := range map[string]int{
		"probed_workers":               3, // Liveness, Readiness, Startup
		"probed_probe_panics_total":    3,
		"probed_container_kills_total": 4, // Liveness and Startup × success, error
		"prober_probe_total":           0, // per pod: only with a worker
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
}
