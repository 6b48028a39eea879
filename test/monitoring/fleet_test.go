package monitoring

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// maxSeriesPerQuery bounds what one dashboard query may return, however
// large the fleet: per-pod and per-node breakdowns are a topk or bottomk.
const maxSeriesPerQuery = 20

var (
	proberSelector = regexp.MustCompile(`prober_probe_[a-z_]+\{([^}]*)\}`)
	boundedBy      = regexp.MustCompile(`\b(?:topk|bottomk)\((\d+),`)
	groupsByPod    = regexp.MustCompile(`\bby \([^)]*\bpod\b[^)]*\)`)
	// topByNode is a query whose outermost aggregation keeps a series per node.
	topByNode        = regexp.MustCompile(`^\(*(?:sum|count|max|min|avg|group) by \([^)]*\bnode\b`)
	killsInRange     = regexp.MustCompile(`^sum by \(probe_type, outcome\) \(increase\(probed_container_kills_total\{job="probed"[^}]*\}\[\$__range\]\)\)$`)
	deferralsInRange = regexp.MustCompile(`^sum by \(reason\) \(increase\(probed_restarts_deferred_total\{job="probed"[^}]*\}\[\$__range\]\)\)$`)
	cpuQuery         = regexp.MustCompile(`rate\(process_cpu_seconds_total\{job="probed"[^}]*\}\[\$__rate_interval\]\)`)
	memQuery         = regexp.MustCompile(`process_resident_memory_bytes\{job="probed"[^}]*\}`)
)

// missingTitle is the stat that counts the nodes without a working probed.
const missingTitle = "probed missing"

// checkFleetRules asserts what keeps the dashboard usable on thousands of
// nodes (TestDashboardStructure calls it): a $pod variable every per-pod
// selector filters on; per-pod breakdowns are a topk or bottomk of at most
// maxSeriesPerQuery, and so are per-node ones; kills and deferrals are
// counted over the selected range; probed's own CPU and memory are shown;
// a stat counts the missing probed.
func checkFleetRules(t *testing.T, d *Dashboard) {
	t.Helper()
	var pod *Variable
	for i, v := range d.Templating.List {
		if v.Name == "pod" {
			pod = &d.Templating.List[i]
		}
	}
	switch {
	case pod == nil:
		t.Error("no pod variable")
	case pod.Type != "query" || !pod.Multi || !pod.IncludeAll || pod.AllValue != ".*":
		// With All as ".*", Grafana does not send every pod of the fleet as
		// one regular expression.
		t.Errorf("pod variable %+v: want a multi-value query with All as .*", *pod)
	case pod.Definition != `label_values(prober_probe_total{job="probed", node=~"$node", namespace=~"$namespace"}, pod)`:
		t.Errorf("pod variable: %q, want the pods of prober_probe_total on $node in $namespace", pod.Definition)
	}

	for _, q := range d.Queries() {
		where := q.Panel + "/" + q.RefID
		for _, m := range proberSelector.FindAllStringSubmatch(q.Expr, -1) {
			if !strings.Contains(m[1], `namespace=~"$namespace"`) || !strings.Contains(m[1], `pod=~"$pod"`) {
				t.Errorf("%s: %s does not filter on $namespace and $pod", where, m[0])
			}
		}
		bounds := boundedBy.FindAllStringSubmatch(q.Expr, -1)
		for _, b := range bounds {
			if n, _ := strconv.Atoi(b[1]); n < 1 || n > maxSeriesPerQuery {
				t.Errorf("%s: %s: want 1 to %d series", where, strings.TrimSuffix(b[0], ","), maxSeriesPerQuery)
			}
		}
		if len(bounds) == 0 && groupsByPod.MatchString(q.Expr) {
			t.Errorf("%s breaks down by pod without topk or bottomk: %s", where, q.Expr)
		}
		if topByNode.MatchString(q.Expr) {
			t.Errorf("%s breaks down by node without topk or bottomk: %s", where, q.Expr)
		}
	}

	var kills, deferrals, cpu, mem, missing bool
	for _, p := range d.AllPanels() {
		for _, tg := range p.Targets {
			// A count over the range is one number per series: an instant
			// query (a range query would plot a sliding window).
			kills = kills || killsInRange.MatchString(tg.Expr) && tg.Instant
			deferrals = deferrals || deferralsInRange.MatchString(tg.Expr) && tg.Instant
			cpu = cpu || cpuQuery.MatchString(tg.Expr)
			mem = mem || memQuery.MatchString(tg.Expr)
		}
		if p.Title == missingTitle {
			missing = p.Type == "stat" && len(p.Targets) == 1 && p.Targets[0].Instant &&
				strings.Contains(p.Targets[0].Expr, `kube_daemonset_status_desired_number_scheduled{daemonset="probed"}`) &&
				strings.Contains(p.Targets[0].Expr, `max_over_time(up{job="probed"}[$__range])`) &&
				strings.HasSuffix(p.Targets[0].Expr, " or vector(0)")
		}
	}
	if !kills {
		t.Error("no instant query counts kills by probe type and outcome over $__range (increase(probed_container_kills_total[$__range]))")
	}
	if !deferrals {
		t.Error("no instant query counts deferred restarts by reason over $__range (increase(probed_restarts_deferred_total[$__range]))")
	}
	if !cpu || !mem {
		t.Errorf("probed's own CPU (%v) and memory (%v): want rate(process_cpu_seconds_total{job=\"probed\"}) and process_resident_memory_bytes{job=\"probed\"}", cpu, mem)
	}
	if !missing {
		t.Errorf("no stat %q: an instant query of the DaemonSet's desired pods (kube-state-metrics) or of the nodes seen up in $__range, minus those up, or 0", missingTitle)
	}
}

// promtoolTests is a `promtool test rules` file of PromQL expression tests.
type promtoolTests struct {
	RuleFiles          []string        `json:"rule_files"`
	EvaluationInterval string          `json:"evaluation_interval"`
	Tests              []promtoolGroup `json:"tests"`
}

type promtoolGroup struct {
	Name        string         `json:"name"`
	Interval    string         `json:"interval"`
	InputSeries []inputSeries  `json:"input_series"`
	ExprTests   []exprTestCase `json:"promql_expr_test"`
}

type inputSeries struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

type exprTestCase struct {
	Expr       string      `json:"expr"`
	EvalTime   string      `json:"eval_time"`
	ExpSamples []expSample `json:"exp_samples"`
}

type expSample struct {
	Labels string  `json:"labels"`
	Value  float64 `json:"value"`
}

// runPromtoolTests runs `promtool test rules` on f.
func runPromtoolTests(t *testing.T, f promtoolTests) {
	t.Helper()
	b, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tests.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, dir, "test", "rules", "tests.yaml"); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// series renders name{labels} with the labels in the given order.
func series(name string, labels ...string) string {
	var b strings.Builder
	b.WriteString(name + "{")
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%s=%q", labels[i], labels[i+1])
	}
	return b.String() + "}"
}

// A fleet for promtool: 15 s apart for 75 minutes, evaluated at 60.
const (
	fleetNodes    = 25
	fleetPods     = 50 // two per node
	fleetSteps    = 300
	fleetInterval = "15s"
	fleetEval     = "60m"
)

// fleetLabelValues are the values each non-pod label takes in the fleet.
var fleetLabelValues = map[string][]string{
	"probe_type": {"Liveness", "Readiness"},
	"result":     {"successful", "failed"},
	"outcome":    {"success", "error"},
	"reason":     {"budget", "workload_guard"},
	"runtime":    {"containerd"},
}

// fleetInput is every documented probed metric on fleetNodes nodes, with
// fleetPods pods' prober_probe_* series, the kubelet's prober_probe_total
// for half of those pods and as many it alone probes (the two disagreeing on
// every pod both probe), and what the dashboard reads besides: up,
// process_*, kube-state-metrics' DaemonSet gauge.
func fleetInput(t *testing.T) []inputSeries {
	t.Helper()
	docs, err := DocumentedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	var in []inputSeries
	add := func(values string, name string, labels ...string) {
		in = append(in, inputSeries{Series: series(name, labels...), Values: values})
	}
	counter := func(inc int) string { return fmt.Sprintf("0+%dx%d", inc, fleetSteps) }
	gauge := func(v int) string { return fmt.Sprintf("%dx%d", v, fleetSteps) }
	// histogram adds a histogram's buckets, _sum and _count.
	histogram := func(name string, inc int, labels ...string) {
		for i, le := range []string{"0.1", "1", "+Inf"} {
			add(counter(inc*min(i+1, 2)), name+"_bucket", append(labels, "le", le)...)
		}
		add(counter(inc), name+"_sum", labels...)
		add(counter(2*inc), name+"_count", labels...)
	}
	node := func(i int) string { return fmt.Sprintf("node-%02d", i) }
	podLabels := func(job string, i int) []string {
		l := []string{"job", job, "node", node(i / 2), "namespace", fmt.Sprintf("ns-%d", i%2), "pod", fmt.Sprintf("pod-%02d", i), "container", "app"}
		if job == "kubelet" {
			l = append(l, "metrics_path", "/metrics/probes")
		}
		return l
	}
	// failures differ between probed and the kubelet, so every probe both
	// run is a disagreement, one way or the other.
	probeTotals := func(job string, i, failures int) {
		for _, pt := range fleetLabelValues["probe_type"] {
			l := append(podLabels(job, i), "probe_type", pt, "pod_uid", fmt.Sprintf("uid-%02d", i))
			add(counter(2), "prober_probe_total", append(l, "result", "successful")...)
			add(counter(failures), "prober_probe_total", append(l, "result", "failed")...)
		}
	}
	for i := 0; i < fleetPods; i++ {
		probeTotals("probed", i, i%3)
		for _, pt := range fleetLabelValues["probe_type"] {
			histogram("prober_probe_duration_seconds", 1+i%4, append(podLabels("probed", i), "probe_type", pt)...)
		}
	}
	for i := fleetPods / 2; i < fleetPods*3/2; i++ {
		probeTotals("kubelet", i, (i+1)%3)
	}

	for _, m := range docs {
		if strings.HasPrefix(m.Name, "prober_") || strings.HasPrefix(m.Name, "probed_webhook_") {
			continue // per pod, above; the webhook's, another job
		}
		// Every combination of the metric's label values.
		combos := [][]string{nil}
		for _, l := range m.Labels {
			values := fleetLabelValues[l]
			if values == nil {
				values = []string{"x"}
			}
			var next [][]string
			for _, c := range combos {
				for _, v := range values {
					next = append(next, append(append([]string(nil), c...), l, v))
				}
			}
			combos = next
		}
		for n := 0; n < fleetNodes; n++ {
			for ci, c := range combos {
				l := append([]string{"job", "probed", "node", node(n)}, c...)
				switch m.Type {
				case "counter":
					add(counter(1+(n+ci)%4), m.Name, l...)
				case "gauge":
					add(gauge(1+(n+ci)%7), m.Name, l...)
				case "histogram":
					histogram(m.Name, 1+(n+ci)%4, l...)
				}
			}
		}
	}
	for n := 0; n < fleetNodes; n++ {
		l := []string{"job", "probed", "node", node(n)}
		add(gauge(1), "up", l...)
		add(counter(1+n%3), "process_cpu_seconds_total", l...)
		add(gauge(80_000_000+n*1_000_000), "process_resident_memory_bytes", l...)
	}
	add(gauge(fleetNodes), "kube_daemonset_status_desired_number_scheduled", "job", "kube-state-metrics", "namespace", "probed-system", "daemonset", "probed")
	return in
}

// On a fleet of 25 nodes and 50 pods, every query of the dashboard returns
// data and at most maxSeriesPerQuery series: nothing lists every pod or
// every node. Evaluated by promtool (Prometheus' own engine), offline.
func TestDashboardBoundedOnAFleet(t *testing.T) {
	d, _, err := LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	g := promtoolGroup{Name: "fleet", Interval: fleetInterval, InputSeries: fleetInput(t)}
	for _, q := range d.Queries() {
		expr, err := Substitute(q.Expr, grafanaDurations, allValues(d))
		if err != nil {
			t.Fatal(err)
		}
		g.ExprTests = append(g.ExprTests,
			exprTestCase{Expr: fmt.Sprintf("count(%s) > %d", expr, maxSeriesPerQuery), EvalTime: fleetEval, ExpSamples: []expSample{}},
			exprTestCase{Expr: fmt.Sprintf("count(%s) > bool 0", expr), EvalTime: fleetEval, ExpSamples: []expSample{{Labels: "{}", Value: 1}}})
	}
	t.Logf("%d input series, %d queries", len(g.InputSeries), len(g.ExprTests)/2)
	// The rule file makes the recorded series the dashboard reads.
	runPromtoolTests(t, promtoolTests{RuleFiles: []string{RepoPath(PlainRulesPath)}, EvaluationInterval: fleetInterval, Tests: []promtoolGroup{g}})
}

// The "probed missing" stat counts the nodes without a probed Prometheus
// scrapes: from kube-state-metrics' desired pods when it is there, else from
// the nodes seen in the range; 0 when all are up, never negative.
func TestDashboardMissingProbed(t *testing.T) {
	d, _, err := LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	var expr string
	for _, p := range d.AllPanels() {
		if p.Title == missingTitle && len(p.Targets) == 1 {
			expr = p.Targets[0].Expr
		}
	}
	if expr == "" {
		t.Fatalf("no panel %q with one query", missingTitle)
	}
	expr, err = Substitute(expr, grafanaDurations, allValues(d)) // $__range is 1h
	if err != nil {
		t.Fatal(err)
	}
	up := func(node, instance, values string) inputSeries {
		return inputSeries{Series: series("up", "job", "probed", "node", node, "instance", instance), Values: values}
	}
	desired := func(n int) inputSeries {
		return inputSeries{Series: series("kube_daemonset_status_desired_number_scheduled", "job", "kube-state-metrics", "namespace", "probed-system", "daemonset", "probed"), Values: fmt.Sprintf("%dx300", n)}
	}
	const (
		always  = "1x300"
		down    = "1x120 0x180" // down from minute 30
		gone    = "1x120"       // no target from minute 30: its pod is gone
		webhook = "0x300"
	)
	otherJob := inputSeries{Series: series("up", "job", "probed-webhook", "node", "node-9", "instance", "10.0.0.9:8443"), Values: webhook}
	cases := []struct {
		name    string
		in      []inputSeries
		missing float64
	}{
		{"kube-state-metrics: 5 desired, 3 targets, one of them down", []inputSeries{desired(5), up("node-1", "a", always), up("node-2", "b", always), up("node-3", "c", down), otherJob}, 3},
		{"kube-state-metrics: none up", []inputSeries{desired(3)}, 3},
		{"kube-state-metrics: all up, two pods on a node during a rollout", []inputSeries{desired(2), up("node-1", "a", always), up("node-2", "b", always), up("node-2", "c", always)}, 0},
		{"kube-state-metrics wins over the range: a node removed from the cluster", []inputSeries{desired(1), up("node-1", "a", always), up("node-2", "b", gone)}, 0},
		{"no kube-state-metrics: one target down, one gone", []inputSeries{up("node-1", "a", always), up("node-2", "b", down), up("node-3", "c", gone), otherJob}, 2},
		{"no kube-state-metrics: a node's pod replaced", []inputSeries{up("node-1", "a", always), up("node-2", "b", gone), up("node-2", "c", "_x120 1x180")}, 0},
		{"no kube-state-metrics: all up", []inputSeries{up("node-1", "a", always), up("node-2", "b", always)}, 0},
		{"nothing scraped at all", []inputSeries{otherJob}, 0},
	}
	var groups []promtoolGroup
	for _, c := range cases {
		groups = append(groups, promtoolGroup{
			Name: c.name, Interval: fleetInterval, InputSeries: c.in,
			ExprTests: []exprTestCase{{Expr: expr, EvalTime: fleetEval, ExpSamples: []expSample{{Labels: "{}", Value: c.missing}}}},
		})
	}
	runPromtoolTests(t, promtoolTests{RuleFiles: []string{}, EvaluationInterval: fleetInterval, Tests: groups})
}
