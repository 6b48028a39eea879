//go:build integration

package prometheus_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/probed-dev/probed/test/harness/prometheus"
)

// A real Prometheus scrapes a real /metrics page every second; queries see
// new values, target labels and the job, and a series dropped from the page
// is gone at the next scrape (staleness marker), not after the 5m lookback.
func TestServerScrapesAndQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := promclient.NewRegistry()
	c := promclient.NewCounterVec(promclient.CounterOpts{Name: "harness_things_total", Help: "Things."}, []string{"kind", "namespace"})
	reg.MustRegister(c)
	c.WithLabelValues("a", "mine").Add(3)
	c.WithLabelValues("b", "mine").Add(1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	p, err := prometheus.Start(ctx, prometheus.Options{
		Targets: []prometheus.Target{{Addr: ln.Addr().String(), Labels: map[string]string{"node": "n1", "namespace": "target-ns"}}},
	})
	if errors.Is(err, prometheus.ErrBinaryMissing) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if err := p.WaitUp(ctx, 1); err != nil {
		t.Fatal(err)
	}

	waitQuery := func(what, q string, ok func(prometheus.Vector) bool) prometheus.Vector {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			v, err := p.Query(ctx, q)
			if err == nil && ok(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s = %v, %v", what, q, v, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	v := waitQuery("first scrape", `harness_things_total{kind="a"}`, func(v prometheus.Vector) bool { return len(v) == 1 && v[0].Value == 3 })
	// honor_labels: the page's namespace wins over the target's; the
	// target's node and the job are added.
	if m := v[0].Metric; m["namespace"] != "mine" || m["node"] != "n1" || m["job"] != prometheus.DefaultJob || m["__name__"] != "harness_things_total" {
		t.Errorf("labels = %v", m)
	}
	c.WithLabelValues("a", "mine").Add(2)
	waitQuery("a new value", `harness_things_total{kind="a"}`, func(v prometheus.Vector) bool { return len(v) == 1 && v[0].Value == 5 })

	// The scraped metadata has the family's type.
	if meta, err := p.Metadata(ctx); err != nil || meta["harness_things_total"] != "counter" {
		t.Errorf("metadata: %v, %v", meta, err)
	}
	// Scalars come back as one sample.
	if v, err := p.Query(ctx, "scalar(sum(harness_things_total))"); err != nil || len(v) != 1 || len(v[0].Metric) != 0 {
		t.Errorf("scalar query: %v, %v", v, err)
	}
	// Bad PromQL is an *APIError.
	var apiErr *prometheus.APIError
	if _, err := p.Query(ctx, "sum(("); !errors.As(err, &apiErr) || apiErr.Type != "bad_data" {
		t.Errorf("bad query: %v", err)
	}

	start := time.Now()
	c.DeleteLabelValues("b", "mine")
	waitQuery("the dropped series gone", `harness_things_total{kind="b"}`, func(v prometheus.Vector) bool { return len(v) == 0 })
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a dropped series took %v to vanish; staleness should take one scrape", d)
	}

	// Stop is by PID and removes the directory.
	pid, dir := p.PID(), p.Dir
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("prometheus (pid %d) still running after Stop", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", dir, err)
	}
}

func TestPromtool(t *testing.T) {
	ctx := context.Background()
	out, err := prometheus.Promtool(ctx, strings.NewReader("# HELP x_total X.\n# TYPE x_total counter\nx_total 1\n"), "check", "metrics")
	if errors.Is(err, prometheus.ErrBinaryMissing) {
		t.Skip(err)
	}
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("a clean page: %v: %s", err, out)
	}
	out, err = prometheus.Promtool(ctx, strings.NewReader("# TYPE x counter\nx 1\n"), "check", "metrics")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(out, "_total") {
		t.Errorf("a counter without _total and HELP: %v: %s", err, out)
	}
}
