package worker

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// The hand-kept histogram exposes what a HistogramVec child fed the same
// durations would: buckets (bounds inclusive), count and sum.
func TestDurationHistogramMatchesClient(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ref", Buckets: prometheus.DefBuckets})
	s := newSeries(probespec.Readiness, "app", "pod", "ns", "uid")
	rnd := rand.New(rand.NewPCG(1, 2))
	vals := []float64{0, .005, .01, 10, 10.0001, 1e9}
	for range 1000 {
		vals = append(vals, math.Exp(rnd.NormFloat64()*2-3))
	}
	for _, v := range vals {
		m.observeProbe(&s, results.Success, v)
		ref.Observe(v)
	}
	var want dto.Metric
	if err := ref.Write(&want); err != nil {
		t.Fatal(err)
	}
	got := gatherOne(t, reg, "prober_probe_duration_seconds")
	if len(got) != 1 {
		t.Fatalf("%d duration series, want 1", len(got))
	}
	g, w := got[0].GetHistogram(), want.GetHistogram()
	if g.GetSampleCount() != w.GetSampleCount() || math.Abs(g.GetSampleSum()-w.GetSampleSum()) > 1e-9*w.GetSampleSum() {
		t.Errorf("count/sum = %d/%v, want %d/%v", g.GetSampleCount(), g.GetSampleSum(), w.GetSampleCount(), w.GetSampleSum())
	}
	if len(g.GetBucket()) != len(w.GetBucket()) {
		t.Fatalf("%d buckets, want %d", len(g.GetBucket()), len(w.GetBucket()))
	}
	for i, b := range w.GetBucket() {
		if gb := g.GetBucket()[i]; gb.GetUpperBound() != b.GetUpperBound() || gb.GetCumulativeCount() != b.GetCumulativeCount() {
			t.Errorf("bucket %d = le %v: %d, want le %v: %d", i, gb.GetUpperBound(), gb.GetCumulativeCount(), b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
}

func gatherOne(t *testing.T, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// A pod and its same-named successor share the duration series (it has no
// pod_uid), as with a HistogramVec; the counters stay apart by pod_uid.
// When the old worker's series goes, what remains is the new one's.
func TestSameNamedPodsShareTheDurationSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	old := newSeries(probespec.Liveness, "app", "web-0", "ns", "uid-1")
	succ := newSeries(probespec.Liveness, "app", "web-0", "ns", "uid-2")
	m.observeProbe(&old, results.Success, 0.2)
	m.observeProbe(&old, results.Failure, 0.2)
	m.observeProbe(&succ, results.Success, 0.3)
	if d := gatherOne(t, reg, "prober_probe_duration_seconds"); len(d) != 1 || d[0].GetHistogram().GetSampleCount() != 2 {
		t.Fatalf("duration series = %v, want one with 2 samples", d)
	}
	want := `
# HELP prober_probe_total Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="app",namespace="ns",pod="web-0",pod_uid="uid-1",probe_type="Liveness",result="failed"} 1
prober_probe_total{container="app",namespace="ns",pod="web-0",pod_uid="uid-1",probe_type="Liveness",result="successful"} 1
prober_probe_total{container="app",namespace="ns",pod="web-0",pod_uid="uid-2",probe_type="Liveness",result="successful"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "prober_probe_total"); err != nil {
		t.Error(err)
	}
	m.deleteSeries(&old)
	if d := gatherOne(t, reg, "prober_probe_duration_seconds"); len(d) != 1 || d[0].GetHistogram().GetSampleSum() != 0.3 {
		t.Fatalf("after the old pod went, duration series = %v, want the successor's alone", d)
	}
	if n := testutil.CollectAndCount(m.probeTotal); n != 1 {
		t.Errorf("%d counter series after the old pod went, want 1", n)
	}
	// A deleted series starts afresh if its worker counts again.
	m.observeProbe(&old, results.Failure, 0.1)
	want = `
# HELP prober_probe_total Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="app",namespace="ns",pod="web-0",pod_uid="uid-1",probe_type="Liveness",result="failed"} 1
prober_probe_total{container="app",namespace="ns",pod="web-0",pod_uid="uid-2",probe_type="Liveness",result="successful"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "prober_probe_total"); err != nil {
		t.Error(err)
	}
}

// TestDurationBucketsAreTheClientDefaults: series.dur is sized by
// prometheusDefBuckets at compile time; it must stay the client's defaults,
// which the kubelet's histogram uses.
func TestDurationBucketsAreTheClientDefaults(t *testing.T) {
	if !slices.Equal(prometheusDefBuckets[:], prometheus.DefBuckets) {
		t.Fatalf("prometheus.DefBuckets is %v; update prometheusDefBuckets (%v)", prometheus.DefBuckets, prometheusDefBuckets)
	}
}
