package worker

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

func TestProbeMetricsAreKubeletCompatible(t *testing.T) {
	e, w := newEnv(t, probespec.Readiness, v1.Probe{})
	e.pods.set(runningPod(epoch))
	expectContinue(t, w, "success")
	e.prober.set(results.Failure)
	expectContinue(t, w, "failure")
	e.prober.set(results.Unknown)
	expectContinue(t, w, "unknown")

	want := `
# HELP prober_probe_total Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="app",namespace="ns",pod="pod",pod_uid="pod-uid-1",probe_type="Readiness",result="failed"} 1
prober_probe_total{container="app",namespace="ns",pod="pod",pod_uid="pod-uid-1",probe_type="Readiness",result="successful"} 1
prober_probe_total{container="app",namespace="ns",pod="pod",pod_uid="pod-uid-1",probe_type="Readiness",result="unknown"} 1
`
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "prober_probe_total"); err != nil {
		t.Error(err)
	}
	// As the kubelet: durations of successful and unknown probes only.
	if n, _ := histogram(t, e.reg, "prober_probe_duration_seconds"); n != 2 {
		t.Errorf("prober_probe_duration_seconds has %d samples, want 2", n)
	}
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "prober_probe_duration_seconds" {
			continue
		}
		var labels []string
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		if got := strings.Join(labels, ","); got != "container,namespace,pod,probe_type" {
			t.Errorf("duration labels = %s", got)
		}
		if b := mf.GetMetric()[0].GetHistogram().GetBucket(); len(b) != len(prometheus.DefBuckets) {
			t.Errorf("%d buckets, want the default %d", len(b), len(prometheus.DefBuckets))
		}
	}
}

func TestWithoutPodUIDLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, WithoutPodUIDLabel())
	// A pod and its same-named successor are summed into one series.
	s := newSeries(probespec.Liveness, "app", "pod", "ns", "uid")
	succ := newSeries(probespec.Liveness, "app", "pod", "ns", "uid-2")
	m.observeProbe(&s, results.Success, 0.1)
	m.observeProbe(&succ, results.Success, 0.1)
	want := `
# HELP prober_probe_total Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="app",namespace="ns",pod="pod",probe_type="Liveness",result="successful"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "prober_probe_total"); err != nil {
		t.Error(err)
	}
	m.deleteSeries(&s)
	m.deleteSeries(&succ)
	if n := testutil.CollectAndCount(m.probeTotal); n != 0 {
		t.Errorf("%d series left after delete", n)
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	s := newSeries(probespec.Startup, "c", "p", "n", "u")
	m.observeProbe(&s, results.Success, 1)
	m.deleteSeries(&s)
	m.workerDelta(&s, 1)
	m.observeLateness(&s, 1)
	m.countPanic(&s)
	m.countKill(&s, KillOutcomeError)

	// A worker without metrics runs too.
	e, w := newEnv(t, probespec.Readiness, v1.Probe{}, func(c *Config) { c.Metrics = nil })
	e.pods.set(runningPod(epoch))
	expectContinue(t, w, "no metrics")
}

func TestNewMetricsWithoutRegistry(t *testing.T) {
	if m := NewMetrics(nil); m == nil || m.probeTotal == nil {
		t.Fatal("NewMetrics(nil) returned no metrics")
	}
}
