package probeview

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// registry exposes the two prober metrics as probed does (same names,
// labels and default buckets), to be scraped in the text format.
type registry struct {
	reg      *prometheus.Registry
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newRegistry() *registry {
	r := &registry{
		reg:      prometheus.NewRegistry(),
		total:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: probeTotal}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: probeDuration, Buckets: prometheus.DefBuckets}, []string{"probe_type", "container", "pod", "namespace"}),
	}
	r.reg.MustRegister(r.total, r.duration)
	return r
}

func (r *registry) scrape(t *testing.T, at time.Time) Scrape {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	s, err := ParseScrape(&b, at)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCosts(t *testing.T) {
	r := newRegistry()
	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	web := []string{"Readiness", "app", "web", "default"}
	// Before the window: 50 successes, 5 failures.
	r.total.WithLabelValues("Readiness", "successful", "app", "web", "default", "u1").Add(50)
	r.total.WithLabelValues("Readiness", "failed", "app", "web", "default", "u1").Add(5)
	// 100 durations: 98 of 3ms, 2 of 700ms; the 99th percentile is the
	// 99th of 100, in the 0.5..1 bucket.
	for i := range 100 {
		d := 0.003
		if i >= 98 {
			d = 0.7
		}
		r.duration.WithLabelValues(web...).Observe(d)
	}
	before := r.scrape(t, t0)
	// 30 s later: 12 more results, 3 of them failures: 24 per minute.
	r.total.WithLabelValues("Readiness", "successful", "app", "web", "default", "u1").Add(9)
	r.total.WithLabelValues("Readiness", "failed", "app", "web", "default", "u1").Add(3)
	// A probe that first gave a result during the window.
	r.total.WithLabelValues("Liveness", "failed", "db", "db-0", "data", "u2").Add(2)
	after := r.scrape(t, t0.Add(30*time.Second))

	costs, err := Costs(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if len(costs) != 2 {
		t.Fatalf("got %d costs, want 2: %+v", len(costs), costs)
	}
	w := costs[0]
	if w.ProbeKey != (ProbeKey{"default", "web", "app", "Readiness"}) {
		t.Fatalf("first (costliest) is %+v, want default/web app Readiness", w.ProbeKey)
	}
	if w.PerMinute != 24 {
		t.Errorf("PerMinute = %v, want 24", w.PerMinute)
	}
	if w.Failures != 8 {
		t.Errorf("Failures = %v, want 8 (since start)", w.Failures)
	}
	// Rank 99 of 100: 98 below 0.5, 2 in (0.5, 1]: 0.5 + 0.5*(99-98)/2.
	if !w.HasP99 || w.P99 != 750*time.Millisecond {
		t.Errorf("P99 = %v (%v), want 750ms", w.P99, w.HasP99)
	}
	if want := time.Duration((98*0.003 + 2*0.7) / 100 * float64(time.Second)); absDiff(w.Mean, want) > time.Microsecond {
		t.Errorf("Mean = %v, want %v", w.Mean, want)
	}
	db := costs[1]
	if db.PerMinute != 4 || db.Failures != 2 || db.HasP99 {
		t.Errorf("new probe: %+v, want 4/min, 2 failures, no p99", db)
	}
}

// probed restarted between the scrapes: its counters start again from 0.
func TestCostsCounterReset(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	r := newRegistry()
	r.total.WithLabelValues("Liveness", "successful", "c", "p", "ns", "u").Add(1000)
	before := r.scrape(t, t0)
	r = newRegistry()
	r.total.WithLabelValues("Liveness", "successful", "c", "p", "ns", "u").Add(6)
	costs, err := Costs(before, r.scrape(t, t0.Add(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	if len(costs) != 1 || costs[0].PerMinute != 6 {
		t.Errorf("after a reset: %+v, want 6 per minute", costs)
	}
	if _, err := Costs(before, before); err == nil {
		t.Error("two scrapes at the same instant gave no error")
	}
}

func TestQuantileEdges(t *testing.T) {
	r := newRegistry()
	// Every observation above the last finite bound (10s): the quantile
	// is that bound, as histogram_quantile answers.
	r.duration.WithLabelValues("Liveness", "c", "p", "ns").Observe(30)
	// All in the first bucket (le 0.005): interpolated from 0.
	for range 4 {
		r.duration.WithLabelValues("Readiness", "c", "p", "ns").Observe(0.001)
	}
	s := r.scrape(t, time.Now())
	got := map[string]float64{}
	for _, m := range s.Families[probeDuration].GetMetric() {
		q, ok := quantile(0.99, m.GetHistogram())
		if !ok {
			t.Fatal("no quantile")
		}
		got[label(m, "probe_type")] = q
	}
	if got["Liveness"] != 10 {
		t.Errorf("+Inf bucket: %v, want 10", got["Liveness"])
	}
	if math.Abs(got["Readiness"]-0.99*0.005) > 1e-12 {
		t.Errorf("first bucket: %v, want %v", got["Readiness"], 0.99*0.005)
	}
}

func TestTopTable(t *testing.T) {
	var b bytes.Buffer
	err := Top(&b, []NodeCosts{{Node: "node-1", Costs: []Cost{
		{ProbeKey: ProbeKey{"default", "web", "app", "Readiness"}, P99: 750 * time.Millisecond, Mean: 17030 * time.Microsecond, HasP99: true, Failures: 8, PerMinute: 24},
		{ProbeKey: ProbeKey{"data", "db-0", "db", "Liveness"}, Failures: 2, PerMinute: 4},
	}}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := `NODE    NAMESPACE  POD   CONTAINER  PROBE      P99    MEAN  FAILED  EXECS/MIN
node-1  default    web   app        Readiness  750ms  17ms  8       24.0
node-1  data       db-0  db         Liveness   -      -     2       4.0
`
	if got := b.String(); !strings.HasPrefix(got, want) || !strings.Contains(got, "over the last 10s") {
		t.Errorf("Top:\n%s\nwant:\n%s(…over the last 10s)", got, want)
	}
}

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}

func TestRoundDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		498948 * time.Microsecond:  "499ms",
		3 * time.Millisecond:       "3ms",
		12345 * time.Microsecond:   "12.3ms",
		1234567 * time.Microsecond: "1.23s",
		750 * time.Microsecond:     "750µs",
		999 * time.Nanosecond:      "999ns",
	} {
		if got := roundDuration(d); got != want {
			t.Errorf("roundDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// With --metrics-probe-duration=namespace the histogram has no pod or
// container: it makes no row of its own, and the probes show no P99.
func TestCostsPerNamespaceDuration(t *testing.T) {
	reg := prometheus.NewRegistry()
	total := prometheus.NewCounterVec(prometheus.CounterOpts{Name: probeTotal}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: probeDuration, Buckets: prometheus.DefBuckets}, []string{"probe_type", "namespace"})
	reg.MustRegister(total, dur)
	r := &registry{reg: reg}
	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	total.WithLabelValues("Readiness", "successful", "app", "web", "default", "u1").Add(10)
	dur.WithLabelValues("Readiness", "default").Observe(0.1)
	before := r.scrape(t, t0)
	total.WithLabelValues("Readiness", "successful", "app", "web", "default", "u1").Add(6)
	after := r.scrape(t, t0.Add(time.Minute))
	costs, err := Costs(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if len(costs) != 1 || costs[0].Pod != "web" || costs[0].HasP99 || costs[0].PerMinute != 6 {
		t.Fatalf("costs = %+v, want web/app alone, 6 a minute, no P99", costs)
	}
}
