package worker

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// durationFamily gathers prober_probe_duration_seconds: its series' label
// names, and sample count and sum by "probe_type/namespace".
func durationFamily(t *testing.T, reg *prometheus.Registry) (labels []string, counts map[string]uint64, sums map[string]float64) {
	t.Helper()
	counts, sums = map[string]uint64{}, map[string]float64{}
	for _, m := range gatherOne(t, reg, "prober_probe_duration_seconds") {
		var names []string
		lv := map[string]string{}
		for _, l := range m.GetLabel() {
			names = append(names, l.GetName())
			lv[l.GetName()] = l.GetValue()
		}
		labels = append(labels, strings.Join(names, ","))
		k := lv["probe_type"] + "/" + lv["namespace"]
		counts[k] += m.GetHistogram().GetSampleCount()
		sums[k] += m.GetHistogram().GetSampleSum()
	}
	return labels, counts, sums
}

// --metrics-probe-duration=namespace: one histogram per namespace and probe
// type, with no pod or container label, that keeps an ended worker's
// observations while its namespace has workers of that type, and goes with
// the last of them.
func TestDurationSeriesPerNamespace(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, WithDurationSeries(DurationPerNamespace))
	a1 := newSeries(probespec.Readiness, "app", "a-1", "a", "uid-1")
	a2 := newSeries(probespec.Readiness, "side", "a-2", "a", "uid-2")
	b1 := newSeries(probespec.Readiness, "app", "b-1", "b", "uid-3")
	bl := newSeries(probespec.Liveness, "app", "b-1", "b", "uid-3")
	m.observeProbe(&a1, results.Success, 0.25)
	m.observeProbe(&a1, results.Failure, 9) // failures are not timed
	m.observeProbe(&a2, results.Unknown, 0.5)
	m.observeProbe(&b1, results.Success, 1)
	m.observeProbe(&bl, results.Success, 2)

	labels, counts, sums := durationFamily(t, reg)
	if len(labels) != 3 {
		t.Fatalf("%d duration series, want 3 (Readiness/a, Readiness/b, Liveness/b): %v", len(labels), labels)
	}
	for _, l := range labels {
		if l != "namespace,probe_type" {
			t.Errorf("duration series labelled %s, want namespace,probe_type only", l)
		}
	}
	if counts["Readiness/a"] != 2 || sums["Readiness/a"] != 0.75 || counts["Readiness/b"] != 1 || counts["Liveness/b"] != 1 {
		t.Errorf("counts %v sums %v: want Readiness/a 2 (0.75 s), Readiness/b 1, Liveness/b 1", counts, sums)
	}
	// The counters stay per pod.
	if n := testutil.CollectAndCount(m.probeTotal); n != 5 {
		t.Errorf("%d prober_probe_total series, want 5", n)
	}

	// a-1 ends: namespace a's histogram keeps its observation (a counter
	// must not fall while it is exposed), its counters go.
	m.deleteSeries(&a1)
	m.observeProbe(&a2, results.Success, 0.5)
	if _, counts, sums = durationFamily(t, reg); counts["Readiness/a"] != 3 || sums["Readiness/a"] != 1.25 {
		t.Errorf("after a-1 ended: Readiness/a count %d sum %v, want 3 and 1.25", counts["Readiness/a"], sums["Readiness/a"])
	}
	// The last worker of a namespace and type ends: its histogram goes.
	m.deleteSeries(&a2)
	m.deleteSeries(&bl)
	if labels, counts, _ = durationFamily(t, reg); len(labels) != 1 || counts["Readiness/b"] != 1 {
		t.Errorf("after a's workers and b's liveness ended: %v %v, want Readiness/b alone", labels, counts)
	}
	m.deleteSeries(&b1)
	if n := testutil.CollectAndCount(m.probeDuration); n != 0 {
		t.Errorf("%d duration series after every worker ended", n)
	}
	if len(m.perPod.retired) != 0 {
		t.Errorf("%d namespace histograms retained after every worker ended", len(m.perPod.retired))
	}
	// A namespace whose workers all ended starts afresh.
	m.observeProbe(&a1, results.Success, 0.1)
	if _, counts, _ = durationFamily(t, reg); counts["Readiness/a"] != 1 {
		t.Errorf("a new worker in a: count %d, want 1", counts["Readiness/a"])
	}
}

// --metrics-probe-duration=none: no duration family on the page at all, the
// counters as before.
func TestDurationSeriesNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, WithDurationSeries(DurationNone))
	s := newSeries(probespec.Readiness, "app", "pod", "ns", "uid")
	m.observeProbe(&s, results.Success, 0.25)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "prober_probe_duration_seconds") {
			t.Errorf("%s on the page with DurationNone: %v", mf.GetName(), mf.GetMetric())
		}
	}
	if n := testutil.CollectAndCount(m.probeTotal); n != 1 {
		t.Errorf("%d prober_probe_total series, want 1", n)
	}
	m.deleteSeries(&s)
	if n := testutil.CollectAndCount(m.probeTotal); n != 0 {
		t.Errorf("%d prober_probe_total series after delete", n)
	}
}

// The flag's default is the contract's histogram; NewMetrics without the
// option, or with a value it does not know, keeps it.
func TestDurationSeriesDefault(t *testing.T) {
	if v := DurationSeriesValues(); len(v) != 3 || v[0] != DurationPerPod {
		t.Errorf("DurationSeriesValues() = %v, want pod first", v)
	}
	for _, opts := range [][]MetricsOption{nil, {WithDurationSeries("bogus")}} {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg, opts...)
		s := newSeries(probespec.Readiness, "app", "pod", "ns", "uid")
		m.observeProbe(&s, results.Success, 0.25)
		labels, counts, _ := durationFamily(t, reg)
		if len(labels) != 1 || labels[0] != "container,namespace,pod,probe_type" || counts["Readiness/ns"] != 1 {
			t.Errorf("%d options: duration series %v %v, want one per pod", len(opts), labels, counts)
		}
	}
}
