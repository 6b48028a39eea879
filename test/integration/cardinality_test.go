//go:build integration

package integration

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promh "github.com/probed-dev/probed/test/harness/prometheus"
)

// A node's series under each --metrics-probe-duration, counted by a real
// Prometheus scraping a real probed: cardNamespaces namespaces of cardPods
// pods, each pod two containers with an HTTP readiness and a TCP liveness
// probe, all succeeding. docs/observability.md's fleet estimate is made from
// these counts:
//
//   - pod: 15 per worker (a result series and the 14 of the histogram);
//   - namespace: 1 per worker, and 14 per namespace and probe type in use;
//   - none: 1 per worker.
//
// With namespace, a deleted pod's counters go at once while its
// namespace's histogram keeps its observations (no counter reset), and the
// histogram goes with the namespace's last pod. The recording rules the
// dashboard reads come out the same shape in every mode but none.
func TestPrometheusSeriesPerDurationMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"pod", "namespace", "none"} {
		t.Run(mode, func(t *testing.T) { seriesPerDurationMode(t, mode) })
	}
}

const (
	cardNamespaces = 3
	cardPods       = 4 // per namespace
	cardWorkers    = cardNamespaces * cardPods * 2 * 2
	cardTypes      = 2 // Readiness, Liveness
)

func seriesPerDurationMode(t *testing.T, mode string) {
	e := newEnv(t)
	ip := loopbackIP()
	web := startHTTPTarget(t, ip, true)
	tcpPort, _ := startTCPTarget(t, ip)
	annotation := mustJSON(probes{
		"app":  {"readinessProbe": httpProbe(web.Port, "/ready", nil), "livenessProbe": map[string]any{"tcpSocket": map[string]any{"port": tcpPort}, "periodSeconds": 1}},
		"side": {"readinessProbe": httpProbe(web.Port, "/ready", nil), "livenessProbe": map[string]any{"tcpSocket": map[string]any{"port": tcpPort}, "periodSeconds": 1}},
	})
	envs := make([]*testEnv, cardNamespaces)
	for i := range envs {
		ne := *e
		ne.ns = fmt.Sprintf("%s-%c", e.ns, 'a'+i)
		if err := cp.EnsureNamespace(e.ctx, ne.ns); err != nil {
			t.Fatal(err)
		}
		envs[i] = &ne
		for p := 0; p < cardPods; p++ {
			pod := ne.createPod(fmt.Sprintf("pod-%d", p), annotation, true, container{name: "app"}, container{name: "side"})
			ne.runPod(pod, ip, time.Minute)
		}
	}
	p := e.startProbed(append(servingCert.args(), "--metrics-probe-duration="+mode)...)
	prom := startPrometheus(t, e.promTarget(p))
	node := e.node
	count := func(sel string) string { return fmt.Sprintf(`count(%s)`, sel) }
	is := func(n float64) func(promh.Vector) bool {
		return func(v promh.Vector) bool { return value(v) == n }
	}
	durCount := fmt.Sprintf(`prober_probe_duration_seconds_count{job="probed",node=%q}`, node)

	prom.eventually("every worker counted a success", count(fmt.Sprintf(`prober_probe_total{job="probed",node=%q,result="successful"}`, node)), 60*time.Second, is(cardWorkers))
	var perWorker, durSeries float64
	switch mode {
	case "pod":
		prom.eventually("a duration histogram per worker", count(durCount), 30*time.Second, is(cardWorkers))
		perWorker, durSeries = 15, 0
	case "namespace":
		prom.eventually("a duration histogram per namespace and probe type", count(durCount), 30*time.Second, is(cardNamespaces*cardTypes))
		for _, s := range prom.query(durCount) {
			if s.Metric["pod"] != "" || s.Metric["container"] != "" {
				t.Errorf("a per-namespace histogram with pod or container labels: %v", s.Metric)
			}
		}
		perWorker, durSeries = 1, 14*cardNamespaces*cardTypes
	case "none":
		// Several scrapes after every worker counted: still no histogram.
		scrapes := fmt.Sprintf(`count_over_time(up{job="probed",node=%q}[1m])`, node)
		v := prom.eventually("three more scrapes", scrapes, 15*time.Second, func(promh.Vector) bool { return true })
		prom.eventually("three more scrapes", scrapes, 15*time.Second, atLeast(value(v)+3))
		if v := prom.query(fmt.Sprintf(`{job="probed",node=%q,__name__=~"prober_probe_duration_seconds.*"}`, node)); !empty(v) {
			t.Errorf("%d duration series with --metrics-probe-duration=none", len(v))
		}
		perWorker, durSeries = 1, 0
	}
	want := perWorker*cardWorkers + durSeries
	prober := prom.eventually("the per-pod series", count(fmt.Sprintf(`{job="probed",node=%q,__name__=~"prober_.+"}`, node)), 30*time.Second, is(want))
	own := prom.query(count(fmt.Sprintf(`{job="probed",node=%q,__name__=~"probed_.+"}`, node)))
	// The target's own series: not the recording rules' (they keep job and
	// node too).
	all := prom.query(count(fmt.Sprintf(`{job="probed",node=%q,__name__!~".+:.+"}`, node)))
	runtime := prom.query(count(fmt.Sprintf(`{job="probed",node=%q,__name__=~"go_.+|process_.+"}`, node)))
	recorded := prom.eventually("the recorded series", count(fmt.Sprintf(`{job="probed",node=%q,__name__=~"node_namespace_probe_type:.+"}`, node)), 30*time.Second,
		func(v promh.Vector) bool {
			// result series: namespaces × types × successful; buckets: × 12 le.
			n := float64(cardNamespaces * cardTypes)
			if mode != "none" {
				n += cardNamespaces * cardTypes * 12
			}
			return value(v) == n
		})
	// One line per mode, for docs/observability.md's estimate.
	t.Logf("SERIES mode=%s workers=%d namespaces=%d prober_*=%v probed_*=%v go_*+process_*=%v all=%v recorded=%v",
		mode, cardWorkers, cardNamespaces, value(prober), value(own), value(runtime), value(all), value(recorded))

	if mode != "namespace" {
		return
	}
	// A pod goes: its counters leave, its namespace's histogram keeps its
	// observations; the namespace's last pod goes: so does the histogram.
	a, c := envs[0], envs[cardNamespaces-1]
	aDur := fmt.Sprintf(`prober_probe_duration_seconds_count{job="probed",node=%q,namespace=%q,probe_type="Readiness"}`, node, a.ns)
	before := value(prom.query(aDur))
	if err := client.CoreV1().Pods(a.ns).Delete(e.ctx, "pod-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	prom.eventually("pod-0's counters gone", fmt.Sprintf(`prober_probe_total{job="probed",node=%q,namespace=%q,pod="pod-0"}`, node, a.ns), 15*time.Second, empty)
	prom.eventually("namespace a's histogram still rising", aDur, 15*time.Second, atLeast(before+4))
	if v := prom.query(fmt.Sprintf(`resets(%s[1m])`, aDur)); value(v) != 0 {
		t.Errorf("namespace a's histogram was reset when pod-0 went: resets = %v", v)
	}
	for p := 0; p < cardPods; p++ {
		if err := client.CoreV1().Pods(c.ns).Delete(e.ctx, fmt.Sprintf("pod-%d", p), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	prom.eventually("namespace c's histograms gone with its last pod",
		fmt.Sprintf(`{job="probed",node=%q,namespace=%q,__name__=~"prober_.+"}`, node, c.ns), 15*time.Second, empty)
	prom.eventually("the other namespaces' histograms stay", count(durCount), 15*time.Second, is((cardNamespaces-1)*cardTypes))
}
