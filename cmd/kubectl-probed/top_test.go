package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// probedEndpoint is a node's probed /metrics, served over HTTP: the
// kubelet's two prober metrics, with pods probes that take the node's
// index in milliseconds, so that nodes differ in cost.
type probedEndpoint struct {
	srv    *httptest.Server
	probes *prometheus.CounterVec
}

func newProbedEndpoint(t *testing.T, node int, pods int, inFlight, maxInFlight *atomic.Int32, fail bool) *probedEndpoint {
	t.Helper()
	reg := prometheus.NewRegistry()
	total := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total"}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "prober_probe_duration_seconds"}, []string{"probe_type", "container", "pod", "namespace"})
	reg.MustRegister(total, dur)
	for p := 0; p < pods; p++ {
		pod := fmt.Sprintf("pod-%d", p)
		total.WithLabelValues("Readiness", "successful", "app", pod, "shop", "uid").Add(100)
		for i := 0; i < 10; i++ {
			dur.WithLabelValues("Readiness", "app", pod, "shop").Observe(float64(node+1) / 1000)
		}
	}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	e := &probedEndpoint{probes: total}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		if fail {
			http.Error(w, "probed is restarting", http.StatusServiceUnavailable)
			return
		}
		// Each scrape sees 10 more results per pod.
		for p := 0; p < pods; p++ {
			total.WithLabelValues("Readiness", "successful", "app", fmt.Sprintf("pod-%d", p), "shop", "uid").Add(10)
		}
		metrics.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// runTopAgainst runs top over endpoints, one node each, failing nodes named
// in failing.
func runTopAgainst(t *testing.T, nodes, pods, concurrency, maxRows int, failing map[int]bool, output string) (string, string, error, int32) {
	t.Helper()
	var inFlight, maxInFlight atomic.Int32
	urls := map[string]string{}
	var names []string
	for i := 0; i < nodes; i++ {
		e := newProbedEndpoint(t, i, pods, &inFlight, &maxInFlight, failing[i])
		name := fmt.Sprintf("node-%03d", i)
		urls[name] = e.srv.URL
		names = append(names, name)
	}
	var mu sync.Mutex
	calls := map[string]int{}
	scrape := func(ctx context.Context, node string) ([]byte, error) {
		mu.Lock()
		calls[node]++
		mu.Unlock()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, urls[node]+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET /metrics: %s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		return b, err
	}
	pf := printFlags()
	*pf.OutputFormat = output
	var out, errOut bytes.Buffer
	// The second scrapes are stamped a minute after the first: 10
	// results a minute.
	var phase atomic.Int32
	now := func() time.Time { return time.Unix(0, 0).Add(time.Duration(phase.Load()) * time.Minute) }
	wait := func(context.Context, time.Duration) error { phase.Add(1); return nil }
	err := runTop(context.Background(), topOptions{interval: time.Minute, concurrency: concurrency, maxRows: maxRows, print: pf},
		names, scrape, now, wait, &out, &errOut)
	for n, c := range calls {
		if want := 2; failing[nodeIndex(n)] {
			if c != 1 {
				t.Errorf("%s failed its first scrape and was scraped %d times", n, c)
			}
		} else if c != want {
			t.Errorf("%s scraped %d times, want %d", n, c, want)
		}
	}
	return out.String(), errOut.String(), err, maxInFlight.Load()
}

func nodeIndex(name string) int {
	var i int
	fmt.Sscanf(name, "node-%d", &i)
	return i
}

// Against 60 probed endpoints, 4 of them failing: never more than
// --concurrency scrapes at once, every healthy node scraped twice and a
// failing one once, the failing nodes named on stderr while the others are
// shown, the costliest rows first and no more than --max-rows.
func TestTopManyNodes(t *testing.T) {
	failing := map[int]bool{3: true, 17: true, 40: true, 59: true}
	out, errOut, err, maxInFlight := runTopAgainst(t, 60, 5, 6, 25, failing, "")
	if err != nil {
		t.Fatalf("top: %v\nstderr:\n%s", err, errOut)
	}
	if maxInFlight > 6 {
		t.Errorf("%d scrapes at once, --concurrency=6", maxInFlight)
	}
	for i := range failing {
		if !strings.Contains(errOut, fmt.Sprintf("warning: node node-%03d left out: GET /metrics: 503 Service Unavailable: probed is restarting", i)) {
			t.Errorf("stderr does not name node-%03d:\n%s", i, errOut)
		}
	}
	if n := strings.Count(errOut, "\n"); n != len(failing) {
		t.Errorf("%d stderr lines, want %d:\n%s", n, len(failing), errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// Header, 25 rows, the legend, what was not shown, the nodes left out.
	if len(lines) != 1+25+3 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	// 56 nodes × 5 probes; the slowest node (node-058, 59 ms) first.
	if !strings.HasPrefix(lines[1], "node-058") || !strings.Contains(out, "(255 more probes not shown: --max-rows=0 shows all)") ||
		!strings.Contains(out, "(4 of 60 nodes left out: see the warnings)") {
		t.Errorf("output:\n%s", out)
	}
	if !strings.Contains(lines[1], "10.0") {
		t.Errorf("first row %q: want 10 executions a minute", lines[1])
	}
}

// -o json: the same rows, and the nodes left out, as one object.
func TestTopJSON(t *testing.T) {
	out, _, err, _ := runTopAgainst(t, 8, 3, 3, 0, map[int]bool{2: true}, "json")
	if err != nil {
		t.Fatal(err)
	}
	var res topResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(res.Probes) != 7*3 || res.NotShown != 0 || len(res.FailedNodes) != 1 || res.FailedNodes[0].Node != "node-002" {
		t.Errorf("%+v", res)
	}
	if p := res.Probes[0]; p.Node != "node-007" || p.P99Seconds == nil || p.ExecsPerMinute != 10 {
		t.Errorf("first probe %+v", p)
	}
}

// Every node failing is an error.
func TestTopAllNodesFail(t *testing.T) {
	_, errOut, err, _ := runTopAgainst(t, 3, 1, 2, 0, map[int]bool{0: true, 1: true, 2: true}, "")
	if err == nil || !strings.Contains(err.Error(), "no probed could be scraped (3 nodes)") || strings.Count(errOut, "warning:") != 3 {
		t.Errorf("err %v, stderr %q", err, errOut)
	}
}
