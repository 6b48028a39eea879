//go:build integration

package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promh "github.com/probed-dev/probed/test/harness/prometheus"
	"github.com/probed-dev/probed/test/monitoring"
)

// What a real Prometheus sees of probed, through PromQL: prober_probe_total
// rises for the right probe_type, result, container, pod, namespace and
// pod_uid while a target is healthy, its failed series rises when it is not;
// the duration histogram has observations; one worker makes 15 or 16 series;
// and a deleted pod's series are gone at the next scrape, not after the 5m
// lookback.
func TestPrometheusProbeMetrics(t *testing.T) {
	t.Parallel()
	o := newObservedNode(t)
	prom, ns, node := o.prom, o.e.ns, o.e.node
	ok := o.total("web", "app", "Readiness", "successful")
	failed := o.total("web", "app", "Readiness", "failed")

	// Healthy: the successful series rises; there is no failed series.
	v := prom.eventually("successful readiness probes of web/app", ok, 30*time.Second, atLeast(2))
	if m := v[0].Metric; m["pod_uid"] != string(o.web.UID) || m["node"] != node || m["instance"] != o.p.addr {
		t.Errorf("labels %v: want pod_uid %s, node %s, instance %s", m, o.web.UID, node, o.p.addr)
	}
	prom.eventually("successful readiness probes of web/app rising", ok, 15*time.Second, atLeast(value(v)+2))
	if v := prom.query(failed); !empty(v) {
		t.Errorf("a healthy target has failed probes: %v", v)
	}
	// Every handler counts: TCP liveness, gRPC readiness.
	prom.eventually("TCP liveness successes", o.total("web", "app", "Liveness", "successful"), 15*time.Second, atLeast(2))
	prom.eventually("gRPC readiness successes", o.total("web", "side", "Readiness", "successful"), 15*time.Second, atLeast(2))

	// The duration histogram has observations, and quantiles come out.
	durSel := fmt.Sprintf(`{job="probed",namespace=%q,pod="web",container="app",probe_type="Readiness"}`, ns)
	prom.eventually("observed durations", "prober_probe_duration_seconds_count"+durSel, 15*time.Second, atLeast(2))
	prom.eventually("a median probe duration", fmt.Sprintf(
		`histogram_quantile(0.5, sum by (le) (rate(prober_probe_duration_seconds_bucket%s[1m])))`, durSel), 15*time.Second,
		func(v promh.Vector) bool { return finite(v) && v[0].Value > 0 && v[0].Value < 1 })

	// Unhealthy: the failed series appears and rises; successes stop.
	o.webApp.Set(false)
	v = prom.eventually("failed readiness probes of web/app", failed, 15*time.Second, atLeast(1))
	prom.eventually("failed readiness probes rising", failed, 15*time.Second, atLeast(value(v)+2))
	prom.eventually("no more successes", fmt.Sprintf("changes(%s[3s])", ok), 15*time.Second,
		func(v promh.Vector) bool { return value(v) == 0 })

	// Cardinality: one worker is its result series (one per result seen)
	// plus the duration histogram's 12 buckets, _sum and _count.
	perWorker := func(pod, container, probeType string) string {
		return fmt.Sprintf(`count({job="probed",namespace=%q,pod=%q,container=%q,probe_type=%q,__name__=~"prober_.+"})`,
			ns, pod, container, probeType)
	}
	prom.eventually("15 series for a worker that only succeeded", perWorker("web", "side", "Readiness"), 10*time.Second,
		func(v promh.Vector) bool { return value(v) == 15 })
	prom.eventually("16 series for a worker that succeeded and failed", perWorker("web", "app", "Readiness"), 10*time.Second,
		func(v promh.Vector) bool { return value(v) == 16 })
	o.breakSick()
	o.waitAllDocumentedSeries()
	for _, q := range []string{
		fmt.Sprintf(`count({job="probed",node=%q,__name__=~"prober_.+"})`, node),
		fmt.Sprintf(`count({job="probed",node=%q,__name__=~"probed_.+"})`, node),
		fmt.Sprintf(`count({job="probed",node=%q})`, node),
		fmt.Sprintf(`sum(probed_workers{job="probed",node=%q})`, node),
	} {
		t.Logf("series count: %s = %v", q, prom.query(q).Values())
	}
	if v := prom.query(fmt.Sprintf(`count({job="probed",node=%q,__name__=~"probed_.+"})`, node)); value(v) > 159 {
		t.Errorf("%v probed_* series on one node; docs/observability.md says at most 159", value(v))
	}

	// Deletion: probed drops the pod's series; Prometheus marks them stale
	// at its next scrape, so a query for "now" no longer finds them (without
	// the markers they would linger for the 5m lookback).
	webSeries := fmt.Sprintf(`{job="probed",namespace=%q,pod="web",__name__=~"prober_.+"}`, ns)
	before := time.Now()
	if v := prom.query(webSeries); len(v) < 3*15 {
		t.Fatalf("%d series of pod web before deletion, want 3 workers' worth", len(v))
	}
	if err := client.CoreV1().Pods(ns).Delete(o.e.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web gone from /metrics", 10*time.Second, func() bool {
		return len(o.p.metricLines(`prober_probe_total{container="app",namespace="`+ns+`",pod="web"`)) == 0
	})
	dropped := time.Now()
	prom.eventually("web's series gone now", webSeries, 10*time.Second, empty)
	t.Logf("web's series vanished from queries %v after probed dropped them (lookback is 5m)", time.Since(dropped).Round(100*time.Millisecond))
	if v, err := prom.QueryAt(context.Background(), webSeries, before); err != nil || len(v) == 0 {
		t.Errorf("web's series before the deletion: %v, %v; the history should stay", v, err)
	}
	prom.eventually("readiness workers down to 2 (exec, tls)", fmt.Sprintf(`probed_workers{job="probed",node=%q,probe_type="Readiness"}`, node),
		10*time.Second, func(v promh.Vector) bool { return value(v) == 2 })
	prom.eventually("liveness workers down to 1 (sick)", fmt.Sprintf(`probed_workers{job="probed",node=%q,probe_type="Liveness"}`, node),
		10*time.Second, func(v promh.Vector) bool { return value(v) == 1 })
}

// Every metric of docs/observability.md's table exists in Prometheus with
// its documented type and exactly its documented labels, and nothing
// undocumented is exposed. With --runtime-type=none the runtime series come
// from an exec probe that fails fast (outcome error, still timed) and from a
// liveness kill that fails (stop outcome error); panics and kills are
// present at zero from the start.
func TestPrometheusDocumentedSeries(t *testing.T) {
	t.Parallel()
	o := newObservedNode(t)
	prom, node := o.prom, o.e.node
	o.breakSick()
	docs := o.waitAllDocumentedSeries()
	meta, err := prom.Metadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range docs {
		documented[m.Name] = true
		if meta[m.Name] != m.Type {
			t.Errorf("%s: Prometheus scraped type %q, documented %q", m.Name, meta[m.Name], m.Type)
		}
		for _, q := range seriesQueries(m, node) {
			for _, s := range prom.query(q) {
				if got, want := strings.Join(labelNames(s), ","), wantLabels(m, q); got != want {
					t.Errorf("%s: labels %s, documented %s", s, got, want)
				}
			}
		}
	}
	for name := range meta {
		if (strings.HasPrefix(name, "probed_") || strings.HasPrefix(name, "prober_")) && !documented[name] {
			t.Errorf("%s is exposed but not documented in %s", name, monitoring.DocPath)
		}
	}
	for q, want := range map[string]float64{
		`probed_runtime_exec_total{runtime="none",outcome="error"}`:           1,
		`probed_runtime_exec_duration_seconds_count{runtime="none"}`:          1,
		`probed_runtime_exec_queue_wait_seconds_count`:                        1,
		`probed_runtime_stops_total{runtime="none",outcome="error"}`:          1,
		`probed_runtime_stop_duration_seconds_count`:                          1,
		`probed_container_kills_total{probe_type="Liveness",outcome="error"}`: 1,
		`probed_status_writes_total{outcome="success"}`:                       1,
		`probed_status_write_duration_seconds_count`:                          1,
	} {
		sel := strings.Replace(q, "{", fmt.Sprintf(`{job="probed",node=%q,`, node), 1)
		if !strings.Contains(q, "{") {
			sel = fmt.Sprintf(`%s{job="probed",node=%q}`, q, node)
		}
		prom.eventually(q, sel, 15*time.Second, atLeast(want))
	}
	for pt, n := range o.workersByType {
		prom.eventually("workers "+pt, fmt.Sprintf(`probed_workers{job="probed",node=%q,probe_type=%q}`, node, pt), 10*time.Second,
			func(v promh.Vector) bool { return value(v) == float64(n) })
	}
	for _, q := range []string{
		`probed_probe_panics_total{probe_type="Readiness"}`,
		`probed_container_kills_total{probe_type="Startup",outcome="success"}`,
	} {
		sel := strings.Replace(q, "{", fmt.Sprintf(`{job="probed",node=%q,`, node), 1)
		if v := prom.query(sel); len(v) != 1 || v[0].Value != 0 {
			t.Errorf("%s = %v, want present at 0", sel, v)
		}
	}
}

// deploy/monitoring's alerts, loaded into the real Prometheus, see real
// probed data: with no runtime every exec is an error and every kill fails,
// so those two alerts go pending for this node, and the others stay quiet;
// once probed stops, ProbedDown goes pending.
func TestPrometheusAlertsOnRealProbed(t *testing.T) {
	t.Parallel()
	o := newObservedNode(t)
	prom, node := o.prom, o.e.node
	o.breakSick()
	alert := func(name string) string { return fmt.Sprintf(`ALERTS{alertname=%q,node=%q}`, name, node) }
	pending := func(v promh.Vector) bool { return len(v) == 1 && v[0].Metric["alertstate"] == "pending" }
	v := prom.eventually("ProbedRuntimeExecErrorsHigh pending", alert("ProbedRuntimeExecErrorsHigh"), 30*time.Second, pending)
	if v[0].Metric["runtime"] != "none" || v[0].Metric["severity"] != "warning" {
		t.Errorf("alert labels %v", v[0].Metric)
	}
	prom.eventually("ProbedContainerKillsFailing pending", alert("ProbedContainerKillsFailing"), 30*time.Second, pending)
	for _, a := range []string{"ProbedDown", "ProbedStatusWritesFailing", "ProbedProbeLatenessHigh", "ProbedContainerRestartsHigh", "ProbedProbePanics"} {
		if v := prom.query(alert(a)); !empty(v) {
			t.Errorf("%s on a healthy probed: %v", a, v)
		}
	}

	o.p.Shutdown()
	prom.eventually("probed's target down", fmt.Sprintf(`up{job="probed",node=%q}`, node), 15*time.Second,
		func(v promh.Vector) bool { return value(v) == 0 })
	prom.eventually("ProbedDown pending", alert("ProbedDown"), 15*time.Second, pending)
}

// --metrics-pod-uid-label=false drops pod_uid from prober_probe_total, and
// only that label: the default keeps it, with the pod's UID.
func TestPrometheusPodUIDLabelFlag(t *testing.T) {
	t.Parallel()
	ip := loopbackIP()
	tg := startHTTPTarget(t, ip, true)
	with, without := newEnv(t), newEnv(t)
	withPod := with.createPod("p", mustJSON(probes{"app": {"readinessProbe": httpProbe(tg.Port, "/ready", nil)}}), true, container{name: "app"})
	withoutPod := without.createPod("p", mustJSON(probes{"app": {"readinessProbe": httpProbe(tg.Port, "/ready", nil)}}), true, container{name: "app"})
	with.runPod(withPod, ip, time.Minute)
	without.runPod(withoutPod, ip, time.Minute)
	pw := with.startProbed(servingCert.args()...)
	pwo := without.startProbed(append(servingCert.args(), "--metrics-pod-uid-label=false")...)
	prom := startPrometheus(t, with.promTarget(pw), without.promTarget(pwo))

	sel := func(e *testEnv) string {
		return fmt.Sprintf(`prober_probe_total{job="probed",node=%q,namespace=%q,pod="p",container="app",probe_type="Readiness",result="successful"}`, e.node, e.ns)
	}
	v := prom.eventually("successes with pod_uid", sel(with), 30*time.Second, atLeast(1))
	if got := strings.Join(labelNames(v[0]), ","); got != "container,instance,job,namespace,node,pod,pod_uid,probe_type,result" || v[0].Metric["pod_uid"] != string(withPod.UID) {
		t.Errorf("default: %s, want pod_uid=%s", v[0], withPod.UID)
	}
	v = prom.eventually("successes without pod_uid", sel(without), 30*time.Second, atLeast(1))
	if got := strings.Join(labelNames(v[0]), ","); got != "container,instance,job,namespace,node,pod,probe_type,result" {
		t.Errorf("--metrics-pod-uid-label=false: %s still has pod_uid", v[0])
	}
	if v := prom.query(fmt.Sprintf(`{job="probed",node=%q,pod_uid!=""}`, without.node)); !empty(v) {
		t.Errorf("series with pod_uid on the node without it: %v", v)
	}
	// The duration histogram never had pod_uid, with or without the flag.
	if v := prom.query(`prober_probe_duration_seconds_count{job="probed",pod_uid!=""}`); !empty(v) {
		t.Errorf("prober_probe_duration_seconds with pod_uid: %v", v)
	}
}

var typeLine = regexp.MustCompile(`^# TYPE (\S+) (\S+)$`)

// promtool check metrics finds nothing on a real probed's /metrics page with
// every documented metric on it, and the page's types are the documented ones.
func TestMetricsPromtoolCleanOnRealScrape(t *testing.T) {
	t.Parallel()
	o := newObservedNode(t)
	o.breakSick()
	docs := o.waitAllDocumentedSeries()
	_, page := o.p.get("/metrics")
	out, err := promh.Promtool(context.Background(), strings.NewReader(page), "check", "metrics")
	if errors.Is(err, promh.ErrBinaryMissing) {
		t.Fatal(err) // hack/install-deps.sh installs it for this tier
	}
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("promtool check metrics on probed's /metrics: %v\n%s", err, out)
	}
	types := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := typeLine.FindStringSubmatch(sc.Text()); m != nil {
			types[m[1]] = m[2]
		}
	}
	for _, m := range docs {
		if types[m.Name] != m.Type {
			t.Errorf("%s: # TYPE %q on the page, documented %q", m.Name, types[m.Name], m.Type)
		}
	}
	t.Logf("%d metric families on the page, %d of them probed's documented ones", len(types), len(docs))
}

// Every query of deploy/monitoring/grafana-dashboard.json returns data from
// the test Prometheus once probes of every kind ran: $__rate_interval is 1m
// (the whole test), $__range 5m, every template variable ($pod too) is its
// "All" value (.*). Some panels show what happened: the kills over the range
// count the failed liveness kills, probed's CPU and memory are its own, and
// "probed missing" is 0 until probed stops, then 1.
func TestDashboardQueriesReturnData(t *testing.T) {
	t.Parallel()
	o := newObservedNode(t)
	o.webApp.Set(false) // for the failing-containers panel
	o.breakSick()
	o.waitAllDocumentedSeries()
	o.prom.eventually("failed probes", o.total("web", "app", "Readiness", "failed"), 15*time.Second, atLeast(1))

	d, _, err := monitoring.LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	durations := map[string]string{"__rate_interval": "1m", "__interval": "5s", "__range": "5m"}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = ".*"
	}
	queries := d.Queries()
	if len(queries) == 0 {
		t.Fatal("no queries in the dashboard")
	}
	exprs := map[string]string{} // "<panel>/<refId>" -> substituted query
	for _, q := range queries {
		if strings.Contains(q.Expr, "$kubelet_job") {
			// No kubelet here: test/e2e's TestShadowModeBesideKubelet runs these.
			continue
		}
		expr, err := monitoring.Substitute(q.Expr, durations, vars)
		if err != nil {
			t.Error(err)
			continue
		}
		v := o.prom.eventually(fmt.Sprintf("panel %q query %s to return data", q.Panel, q.RefID), expr, 30*time.Second, finite)
		t.Logf("%-32s %s: %d series, first %g", q.Panel, q.RefID, len(v), v[0].Value)
		exprs[q.Panel+"/"+q.RefID] = expr
	}
	panel := func(key string) string {
		t.Helper()
		if exprs[key] == "" {
			t.Fatalf("no dashboard query %s", key)
		}
		return exprs[key]
	}
	o.prom.eventually("failed liveness kills in the range", panel("Container kills in the time range/A"), 15*time.Second, func(v promh.Vector) bool {
		for _, s := range v {
			if s.Metric["probe_type"] == "Liveness" && s.Metric["outcome"] == "error" && s.Value >= 1 {
				return true
			}
		}
		return false
	})
	o.prom.eventually("probed's CPU", panel("probed CPU/A"), 15*time.Second, func(v promh.Vector) bool {
		return len(v) == 1 && v[0].Metric["node"] == o.e.node && v[0].Value > 0
	})
	v := o.prom.eventually("probed's resident memory", panel("probed memory/A"), 15*time.Second, func(v promh.Vector) bool {
		return len(v) == 1 && v[0].Value > 8<<20 && v[0].Value < 1<<30
	})
	t.Logf("probed's resident memory: %.1f MiB", v[0].Value/(1<<20))
	missing := panel("probed missing/A")
	if v := o.prom.query(missing); value(v) != 0 {
		t.Errorf("probed missing = %v while probed is up, want 0", v)
	}
	labelArg := regexp.MustCompile(`,\s*(\w+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		expr, err := monitoring.Substitute(v.VariableQuery(), durations, vars)
		if err != nil {
			t.Error(err)
			continue
		}
		m := labelArg.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: definition %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		res := o.prom.eventually("variable "+v.Name, expr, 15*time.Second, func(v promh.Vector) bool { return len(v) > 0 })
		if res[0].Metric[m[1]] == "" {
			t.Errorf("variable %s: %s has no %s label: %v", v.Name, expr, m[1], res[0])
		}
	}

	// No kube-state-metrics here: the node probed ran on in the range,
	// without a probed up now, is the one missing.
	o.p.Shutdown()
	o.prom.eventually("probed missing once it stopped", missing, 15*time.Second, func(v promh.Vector) bool { return value(v) == 1 })
}
