//go:build integration

package integration

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	promh "github.com/probed-dev/probed/test/harness/prometheus"
	"github.com/probed-dev/probed/test/monitoring"
)

// promServer is a test's own real Prometheus, scraping its probed(s) every
// second with deploy/monitoring's alert rules loaded.
type promServer struct {
	*promh.Server
	t *testing.T
}

// startPrometheus starts Prometheus on targets and waits until it has
// scraped each of them once. It scrapes as deploy/monitoring's PodMonitor
// does: over TLS, with the token of a service account bound to deploy/'s
// probed-metrics-reader and nothing else. It verifies the targets'
// certificates against servingCert's CA: start them with servingCert.args().
func startPrometheus(t *testing.T, targets ...promh.Target) *promServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	token, err := readerToken(ctx, "probed-it-prometheus", "probed-metrics-reader")
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := promh.Start(ctx, promh.Options{
		Targets:   targets,
		Scrape:    promh.Scrape{HTTPS: true, BearerTokenFile: tokenFile, CAFile: servingCert.caFile},
		RuleFiles: []string{monitoring.RepoPath(monitoring.PlainRulesPath)},
	})
	if err != nil {
		// hack/install-deps.sh installs Debian's prometheus for this tier.
		t.Fatalf("starting Prometheus: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus log (tail):\n%s", s.LogTail(40))
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stopping Prometheus: %v", err)
		}
	})
	if err := s.WaitUp(ctx, len(targets)); err != nil {
		t.Fatal(err)
	}
	return &promServer{Server: s, t: t}
}

// promTarget is probed's metrics address, labelled with its node as the
// PodMonitor's relabeling does.
func (e *testEnv) promTarget(p *probedProc) promh.Target {
	return promh.Target{Addr: p.addr, Labels: map[string]string{"node": e.node}}
}

// query evaluates q now; an API error fails the test.
func (s *promServer) query(q string) promh.Vector {
	s.t.Helper()
	v, err := s.Query(context.Background(), q)
	if err != nil {
		s.t.Fatalf("query %s: %v", q, err)
	}
	return v
}

// eventually polls q until ok holds and returns that result.
func (s *promServer) eventually(what, q string, timeout time.Duration, ok func(promh.Vector) bool) promh.Vector {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, err := s.Query(context.Background(), q)
		if err == nil && ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out after %v waiting for %s: %s = %v (err %v)", timeout, what, q, v, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// value is the single sample's value of v, or NaN if v is not one sample.
func value(v promh.Vector) float64 {
	if len(v) != 1 {
		return math.NaN()
	}
	return v[0].Value
}

func atLeast(n float64) func(promh.Vector) bool {
	return func(v promh.Vector) bool { return value(v) >= n }
}

func empty(v promh.Vector) bool { return len(v) == 0 }

// finite reports whether some sample of v is a number (histogram_quantile
// over a window without observations gives NaN).
func finite(v promh.Vector) bool {
	for _, s := range v {
		if !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) {
			return true
		}
	}
	return false
}

// labelNames are a sample's label names other than __name__, sorted.
func labelNames(s promh.Sample) []string {
	var out []string
	for k := range s.Metric {
		if k != "__name__" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// observedNode is one node whose probed runs every probe handler, with
// every documented series present once breakSick has run:
//
//   - web/app: readiness over HTTP (the test flips it), liveness over TCP;
//   - web/side: readiness over gRPC, always serving;
//   - sick/app: startup and liveness over HTTP; breakSick fails the
//     liveness target after startup, so probed tries to kill the container,
//     which fails (no runtime here) and is retried every period;
//   - exec/app: readiness by exec, which fails fast with no runtime
//     (--runtime-type=none): an exec error, no probe result;
//   - tls/app: readiness over HTTPS with probed.io/tls, verified against a
//     CA in the pod's secret volume, laid out as the kubelet's pods
//     directory (--pod-volumes-dir).
type observedNode struct {
	e                          *testEnv
	p                          *probedProc
	prom                       *promServer
	web, sick, execPod, tlsPod *v1.Pod
	webApp, sickApp            *httpTarget
	workersByType              map[string]int
}

func newObservedNode(t *testing.T, probedArgs ...string) *observedNode {
	t.Helper()
	e := newEnv(t)
	ip := loopbackIP()
	o := &observedNode{e: e,
		webApp:        startHTTPTarget(t, ip, true),
		sickApp:       startHTTPTarget(t, ip, true),
		workersByType: map[string]int{"Readiness": 4, "Liveness": 2, "Startup": 1},
	}
	g := startGRPCTarget(t, ip)
	g.Set(true)
	tcpPort, _ := startTCPTarget(t, ip)
	o.web = e.createPod("web", mustJSON(probes{
		"app": {
			"readinessProbe": httpProbe(o.webApp.Port, "/ready", nil),
			"livenessProbe":  map[string]any{"tcpSocket": map[string]any{"port": tcpPort}, "periodSeconds": 1},
		},
		"side": {"readinessProbe": map[string]any{"grpc": map[string]any{"port": g.Port}, "periodSeconds": 1}},
	}), true, container{name: "app"}, container{name: "side"})
	o.sick = e.createPod("sick", mustJSON(probes{"app": {
		"startupProbe":  httpProbe(o.sickApp.Port, "/healthz", nil),
		"livenessProbe": httpProbe(o.sickApp.Port, "/healthz", nil),
	}}), true, container{name: "app"})
	o.execPod = e.createPod("exec", mustJSON(probes{"app": {
		"readinessProbe": map[string]any{"exec": map[string]any{"command": []string{"true"}}, "periodSeconds": 1},
	}}), true, container{name: "app"})
	tlsPort, caPEM := startHTTPSTarget(t, ip, "probe.test")
	o.tlsPod = e.createPodWithVolumes("tls", mustJSON(probes{"app": {"readinessProbe": map[string]any{
		"httpGet":       map[string]any{"port": tlsPort, "scheme": "HTTPS", "path": "/"},
		"periodSeconds": 1,
		"probed.io/tls": map[string]any{"serverName": "probe.test", "ca": map[string]any{"volume": "certs"}},
	}}}), true, []v1.Volume{{Name: "certs", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "certs"}}}},
		container{name: "app"})
	podsDir := t.TempDir()
	volDir := filepath.Join(podsDir, string(o.tlsPod.UID), "volumes", "kubernetes.io~secret", "certs")
	if err := os.MkdirAll(volDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(volDir, "ca.crt"), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{o.web, o.sick, o.execPod, o.tlsPod} {
		e.runPod(p, ip, time.Minute)
	}
	o.p = e.startProbed(append(append(servingCert.args(), "--pod-volumes-dir="+podsDir), probedArgs...)...)
	o.prom = startPrometheus(t, e.promTarget(o.p))
	return o
}

// total is the PromQL selector of prober_probe_total for one worker and result.
func (o *observedNode) total(pod, container, probeType, result string) string {
	return fmt.Sprintf(`prober_probe_total{job="probed",namespace=%q,pod=%q,container=%q,probe_type=%q,result=%q}`,
		o.e.ns, pod, container, probeType, result)
}

// breakSick fails sick/app's liveness target once its startup probe passed,
// and waits for Prometheus to see the failed kill.
func (o *observedNode) breakSick() {
	o.e.t.Helper()
	o.e.waitCond("sick", "started.probed.io/app", v1.ConditionTrue, 20*time.Second)
	o.sickApp.Set(false)
	o.prom.eventually("a failed liveness kill", fmt.Sprintf(
		`probed_container_kills_total{job="probed",node=%q,probe_type="Liveness",outcome="error"}`, o.e.node), 30*time.Second, atLeast(1))
}

// waitAllDocumentedSeries waits until every probed metric of
// docs/observability.md's table has series in Prometheus for this node, and
// returns those rows. The table's probed_webhook_* rows are the adoption
// webhook's (its own tests scrape them), not probed's.
func (o *observedNode) waitAllDocumentedSeries() []monitoring.DocMetric {
	o.e.t.Helper()
	all, err := monitoring.DocumentedMetrics()
	if err != nil {
		o.e.t.Fatal(err)
	}
	var docs []monitoring.DocMetric
	for _, m := range all {
		if !strings.HasPrefix(m.Name, "probed_webhook_") {
			docs = append(docs, m)
		}
	}
	for _, m := range docs {
		for _, q := range seriesQueries(m, o.e.node) {
			o.prom.eventually(m.Name+" present", q, 30*time.Second, func(v promh.Vector) bool { return len(v) > 0 })
		}
	}
	return docs
}

// seriesQueries select a documented metric's series on node: the metric
// itself, or a histogram's _bucket, _sum and _count.
func seriesQueries(m monitoring.DocMetric, node string) []string {
	names := []string{m.Name}
	if m.Type == "histogram" {
		names = []string{m.Name + "_bucket", m.Name + "_sum", m.Name + "_count"}
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf(`%s{job="probed",node=%q}`, n, node)
	}
	return out
}

// wantLabels is what a documented metric's series carry in Prometheus: the
// documented labels, the target's (job, instance, node), and le on buckets.
func wantLabels(m monitoring.DocMetric, query string) string {
	l := append([]string{"instance", "job", "node"}, m.Labels...)
	if strings.HasPrefix(query, m.Name+"_bucket{") {
		l = append(l, "le")
	}
	sort.Strings(l)
	return strings.Join(l, ",")
}
