package monitoring

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/internal/docgen"
)

var update = flag.Bool("update", false, "rewrite the generated files: "+PlainRulesPath+" from "+PrometheusRulePath+", and the chart's copies of deploy/monitoring")

// promtool runs promtool in dir, or skips the test when it is not installed
// (hack/install-deps.sh installs Debian's prometheus package, which has it).
func promtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (hack/install-deps.sh installs it)")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The plain rule file is the PrometheusRule's spec, generated.
func TestPlainRulesInSync(t *testing.T) {
	want, err := GeneratePlainRules()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(RepoPath(PlainRulesPath), want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(RepoPath(PlainRulesPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of sync with %s; regenerate it:\n  go test ./test/monitoring/ -run TestPlainRulesInSync -update", PlainRulesPath, PrometheusRulePath)
	}
}

func TestRulesPromtoolCheck(t *testing.T) {
	out, err := promtool(t, RepoPath("."), "check", "rules", PlainRulesPath)
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(out))
}

func TestRulesPromtoolUnitTests(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out, err := promtool(t, dir, "test", "rules", "rules_test.yaml")
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// ruleTests is the part of rules_test.yaml this test reads.
type ruleTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			EvalTime  string `json:"eval_time"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// Every alert has a case where it fires and one where it does not; every
// case names a real alert; the unit tests load the plain rule file.
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	rules, err := LoadPlainRules()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(b, &rt); err != nil {
		t.Fatal(err)
	}
	if len(rt.RuleFiles) != 1 || filepath.Clean(rt.RuleFiles[0]) != filepath.Clean("../../"+PlainRulesPath) {
		t.Errorf("rule_files = %v, want [../../%s]", rt.RuleFiles, PlainRulesPath)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	known := map[string]bool{}
	for _, a := range rules.Alerts() {
		known[a.Alert] = true
	}
	for _, tg := range rt.Tests {
		for _, c := range tg.AlertRuleTest {
			if !known[c.Alertname] {
				t.Errorf("test %q checks unknown alert %q", tg.Name, c.Alertname)
			}
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname]++
			} else {
				quiet[c.Alertname]++
			}
		}
	}
	for a := range known {
		if fires[a] == 0 || quiet[a] == 0 {
			t.Errorf("alert %s: %d firing and %d quiet test cases, want at least one of each", a, fires[a], quiet[a])
		}
	}
}

var heading = regexp.MustCompile(`(?m)^#{2,4} (.+)$`)

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(h string) string { return docgen.Slug(strings.TrimSpace(h)) }

// Every alert has a severity, a summary and a description, and a
// runbook_url pointing at its own section of docs/observability.md.
func TestAlertsHaveRunbooks(t *testing.T) {
	rules, err := LoadPlainRules()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(RepoPath(DocPath))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(string(doc), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	alerts := rules.Alerts()
	if len(alerts) < 5 {
		t.Fatalf("%d alerts, want at least 5", len(alerts))
	}
	base, err := RunbookBase()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if s := a.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q", a.Alert, s)
		}
		if a.Annotations["summary"] == "" || a.Annotations["description"] == "" {
			t.Errorf("%s: no summary or description", a.Alert)
		}
		anchor := strings.ToLower(a.Alert)
		if want := base + "#" + anchor; a.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q (the release's docs; after a change of VERSION:\n  go test ./test/monitoring/ -run TestRunbookLinks -update)", a.Alert, a.Annotations["runbook_url"], want)
		}
		if !anchors[anchor] {
			t.Errorf("%s: %s has no section #%s (a heading %q)", a.Alert, DocPath, anchor, a.Alert)
		}
		// The adoption webhook's alerts select its own job; those on the
		// API server's metrics, probed's webhooks by name.
		if !strings.Contains(a.Expr, `job="probed"`) && !strings.Contains(a.Expr, `job="probed-webhook"`) &&
			!strings.Contains(a.Expr, `{name=~".+\\.probed\\.io"}`) {
			t.Errorf("%s: the expression does not select job=\"probed\" (or \"probed-webhook\", or probed's webhooks by name): %s", a.Alert, a.Expr)
		}
	}
}

// readYAMLDocs decodes every document of a multi-document YAML file.
func readYAMLDocs(t *testing.T, rel string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(RepoPath(rel))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

func dig(m any, path ...string) any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

// The PodMonitor selects the DaemonSet's pods and their metrics port, keeps
// prober_probe_total's own labels, and gives the job and node labels the
// alerts and the dashboard use.
func TestPodMonitorMatchesDaemonSet(t *testing.T) {
	var ds map[string]any
	for _, d := range readYAMLDocs(t, "deploy/daemonset.yaml") {
		if d["kind"] == "DaemonSet" {
			ds = d
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet in deploy/daemonset.yaml")
	}
	pms := readYAMLDocs(t, PodMonitorPath)
	if len(pms) != 1 {
		t.Fatalf("%d documents in %s, want 1", len(pms), PodMonitorPath)
	}
	pm := pms[0]
	if pm["apiVersion"] != "monitoring.coreos.com/v1" || pm["kind"] != "PodMonitor" {
		t.Fatalf("%s is %v %v", PodMonitorPath, pm["apiVersion"], pm["kind"])
	}
	podLabels, _ := dig(ds, "spec", "template", "metadata", "labels").(map[string]any)
	sel, _ := dig(pm, "spec", "selector", "matchLabels").(map[string]any)
	if len(sel) == 0 {
		t.Error("the PodMonitor has no selector.matchLabels")
	}
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("selector %s=%v does not match the DaemonSet's pod labels %v", k, v, podLabels)
		}
	}
	ns := dig(ds, "metadata", "namespace")
	names, _ := dig(pm, "spec", "namespaceSelector", "matchNames").([]any)
	if len(names) != 1 || names[0] != ns || dig(pm, "metadata", "namespace") != ns {
		t.Errorf("PodMonitor namespace %v, namespaceSelector %v; the DaemonSet is in %v", dig(pm, "metadata", "namespace"), names, ns)
	}
	if jl, _ := dig(pm, "spec", "jobLabel").(string); podLabels[jl] != "probed" {
		t.Errorf("jobLabel %q gives job=%v, want probed (the alerts select job=\"probed\")", jl, podLabels[jl])
	}
	eps, _ := dig(pm, "spec", "podMetricsEndpoints").([]any)
	if len(eps) != 1 {
		t.Fatalf("%d podMetricsEndpoints, want 1", len(eps))
	}
	ep := eps[0]
	containers, _ := dig(ds, "spec", "template", "spec", "containers").([]any)
	var containerPort any
	for _, c := range containers {
		ports, _ := dig(c, "ports").([]any)
		for _, p := range ports {
			if dig(p, "name") == dig(ep, "port") {
				containerPort = dig(p, "containerPort")
			}
		}
	}
	if containerPort == nil {
		t.Errorf("podMetricsEndpoints port %v is no named port of the DaemonSet", dig(ep, "port"))
	}
	ann, _ := dig(ds, "spec", "template", "metadata", "annotations").(map[string]any)
	if fmt.Sprint(ann["prometheus.io/port"]) != fmt.Sprint(containerPort) || ann["prometheus.io/path"] != dig(ep, "path") {
		t.Errorf("the pod's prometheus.io annotations %v disagree with the PodMonitor (port %v, path %v)", ann, containerPort, dig(ep, "path"))
	}
	// probed serves /metrics over TLS with a token (contract §5): the
	// PodMonitor and the annotations say https, and the PodMonitor sends the
	// token of an account bound to probed-metrics-reader.
	if dig(ep, "scheme") != "https" || ann["prometheus.io/scheme"] != "https" {
		t.Errorf("scheme %v, prometheus.io/scheme %v: probed serves /metrics over https", dig(ep, "scheme"), ann["prometheus.io/scheme"])
	}
	if dig(ep, "authorization", "type") != "Bearer" || dig(ep, "authorization", "credentials", "name") == nil {
		t.Errorf("authorization %v: want a Bearer token from a Secret", dig(ep, "authorization"))
	}
	if dig(ep, "honorLabels") != true {
		t.Error("honorLabels is not true: prober_probe_total's namespace, pod and container would become exported_*")
	}
	relabel := false
	rls, _ := dig(ep, "relabelings").([]any)
	for _, r := range rls {
		src, _ := dig(r, "sourceLabels").([]any)
		if dig(r, "targetLabel") == "node" && len(src) == 1 && src[0] == "__meta_kubernetes_pod_node_name" {
			relabel = true
		}
	}
	if !relabel {
		t.Error("no relabeling sets node from __meta_kubernetes_pod_node_name")
	}
}

// The kustomization lists the PodMonitor and the PrometheusRule, and makes
// the dashboard a ConfigMap for Grafana's sidecar.
func TestKustomization(t *testing.T) {
	k := readYAMLDocs(t, KustomizationPath)[0]
	res, _ := k["resources"].([]any)
	kinds := map[string]bool{}
	for _, r := range res {
		for _, d := range readYAMLDocs(t, "deploy/monitoring/"+r.(string)) {
			kinds[fmt.Sprint(d["kind"])] = true
			if d["kind"] == "ClusterRoleBinding" {
				continue // cluster-scoped
			}
			if dig(d, "metadata", "annotations", "config.kubernetes.io/local-config") == "true" {
				continue // kustomize's own configuration (runbooks.yaml), never applied
			}
			if ns := dig(d, "metadata", "namespace"); ns != k["namespace"] {
				t.Errorf("%s: namespace %v, the kustomization's is %v", r, ns, k["namespace"])
			}
		}
	}
	if !kinds["PodMonitor"] || !kinds["PrometheusRule"] {
		t.Errorf("resources %v: want a PodMonitor and a PrometheusRule", res)
	}
	gens, _ := k["configMapGenerator"].([]any)
	found := false
	for _, g := range gens {
		files, _ := dig(g, "files").([]any)
		for _, f := range files {
			if "deploy/monitoring/"+f.(string) == DashboardPath {
				found = true
			}
			if _, err := os.Stat(RepoPath("deploy/monitoring/" + f.(string))); err != nil {
				t.Error(err)
			}
		}
		if dig(g, "options", "labels", "grafana_dashboard") != "1" {
			t.Errorf("configMapGenerator %v lacks the grafana_dashboard: \"1\" label", dig(g, "name"))
		}
	}
	if !found {
		t.Errorf("no configMapGenerator ships %s", DashboardPath)
	}
}

// The dashboard has the structure Grafana's dashboard JSON model expects.
func TestDashboardStructure(t *testing.T) {
	d, raw, err := LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"uid", "title", "schemaVersion", "panels", "templating", "time"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("no top-level %q", k)
		}
	}
	if d.UID == "" || len(d.UID) > 40 || !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(d.UID) {
		t.Errorf("uid %q: want 1-40 of [A-Za-z0-9_-]", d.UID)
	}
	if d.Title == "" {
		t.Error("no title")
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want a current model (>= 36, panel datasources as objects)", d.SchemaVersion)
	}
	if id, ok := generic["id"]; ok && id != nil {
		t.Errorf("id = %v: a dashboard to import has a null id", id)
	}

	vars := map[string]Variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if ds, ok := vars["datasource"]; !ok || ds.Type != "datasource" || !strings.Contains(string(ds.Query), "prometheus") {
		t.Errorf("no datasource variable of type datasource for prometheus: %+v", vars["datasource"])
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				t.Errorf("variable %s: datasource %+v, want ${datasource}", v.Name, v.Datasource)
			}
			if v.VariableQuery() == "" {
				t.Errorf("variable %s: no query", v.Name)
			}
		}
	}

	ids := map[int]bool{}
	var occupied [][24]bool
	for _, p := range d.AllPanels() {
		if p.ID <= 0 || ids[p.ID] {
			t.Errorf("panel %q: id %d missing or repeated", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" || p.Type == "" {
			t.Errorf("panel %d: no title or type", p.ID)
		}
		g := p.GridPos
		if g == nil || g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
			continue
		}
		for y := g.Y; y < g.Y+g.H; y++ {
			for len(occupied) <= y {
				occupied = append(occupied, [24]bool{})
			}
			for x := g.X; x < g.X+g.W; x++ {
				if occupied[y][x] {
					t.Errorf("panel %q overlaps another at (%d,%d)", p.Title, x, y)
				}
				occupied[y][x] = true
			}
		}
		if p.Type == "row" {
			if len(p.Targets) > 0 {
				t.Errorf("row %q has targets", p.Title)
			}
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want prometheus ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no targets", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target %+v without expr or with a missing or repeated refId", p.Title, tg)
			}
			refs[tg.RefID] = true
			if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: target datasource %+v", p.Title, tg.Datasource)
			}
			if !strings.Contains(tg.Expr, `job="probed"`) {
				t.Errorf("panel %q: %s does not select job=\"probed\" (the kubelet exposes prober_probe_total too)", p.Title, tg.Expr)
			}
			if _, err := Substitute(tg.Expr, grafanaDurations, allValues(d)); err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
			}
		}
	}

	// What the issue asks the dashboard to show.
	exprs := ""
	for _, q := range d.Queries() {
		exprs += q.Expr + "\n"
	}
	for what, re := range map[string]string{
		"probe results by namespace/pod/container and type": `sum by \(namespace, pod, container, probe_type, result\) \(rate\(prober_probe_total`,
		"probe duration percentiles":                        `histogram_quantile\(0\.99, sum by \(le, probe_type\) \(node_namespace_probe_type:prober_probe_duration_seconds_bucket:rate5m\{`,
		"lateness":                                          `probed_probe_lateness_seconds_bucket`,
		"status write latency":                              `probed_status_write_duration_seconds_bucket`,
		"status write errors":                               `probed_status_writes_total\{outcome="error"`,
		"exec latency":                                      `probed_runtime_exec_duration_seconds_bucket`,
		"exec queue wait":                                   `probed_runtime_exec_queue_wait_seconds_bucket`,
		"workers by type":                                   `sum by \(probe_type\) \(probed_workers`,
	} {
		if !regexp.MustCompile(re).MatchString(exprs) {
			t.Errorf("no panel shows %s (no query matching %s)", what, re)
		}
	}
	checkFleetRules(t, d)
}

// grafanaDurations stand in for Grafana's interval variables in offline checks.
var grafanaDurations = map[string]string{"__rate_interval": "1m", "__interval": "15s", "__range": "1h"}

// allValues gives each template variable its "All" value (a text box its
// default).
func allValues(d *Dashboard) map[string]string {
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.AllValue
		switch v.Type {
		case "datasource":
			vars[v.Name] = "prometheus"
		case "textbox":
			var def string
			_ = json.Unmarshal(v.Query, &def)
			vars[v.Name] = def
		}
	}
	return vars
}

// kubeletProbeLabels are the labels of the kubelet's prober_probe_total
// (pkg/kubelet/metrics), the only ones the two scrapes share: node, job,
// instance and metrics_path differ between them.
var kubeletProbeLabels = map[string]bool{"probe_type": true, "result": true, "container": true, "pod": true, "namespace": true, "pod_uid": true}

var grouping = regexp.MustCompile(`\b(?:by|on|without|ignoring)\s*\(([^)]*)\)`)

// The shadow-mode panels (docs/migration.md) line up the kubelet's
// prober_probe_total, from the scrape named by the kubelet_job text box,
// against probed's for the same pod, container and probe type: success
// ratios side by side, and the disagreements. Every grouping and join is on
// labels both series have.
func TestDashboardShadowPanels(t *testing.T) {
	d, _, err := LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	var kubeletJob *Variable
	for i, v := range d.Templating.List {
		if v.Name == "kubelet_job" {
			kubeletJob = &d.Templating.List[i]
		}
	}
	var def string
	if kubeletJob == nil || kubeletJob.Type != "textbox" || json.Unmarshal(kubeletJob.Query, &def) != nil || def != "kubelet" {
		t.Fatalf("no kubelet_job text box defaulting to kubelet: %+v", kubeletJob)
	}
	kubeletSel := `prober_probe_total{job=~"$kubelet_job", metrics_path=~"/metrics/probes|"`
	var shadow []Query
	for _, q := range d.Queries() {
		if strings.HasPrefix(q.Panel, "Shadow") {
			shadow = append(shadow, q)
		}
	}
	want := map[string]string{
		"probed's success ratio per probe, the lowest":                         `^bottomk\(20, sum by \(namespace, pod, container, probe_type\) \(rate\(prober_probe_total\{job="probed"[^}]*result="successful"`,
		"the kubelet's success ratio, for the probes whose probed ratio shows": `^\(sum by \(namespace, pod, container, probe_type\) \(rate\(` + regexp.QuoteMeta(kubeletSel) + `.*\) and on \(namespace, pod, container, probe_type\) bottomk\(20, sum by \(namespace, pod, container, probe_type\) \(rate\(prober_probe_total\{job="probed"`,
		"their largest differences either way":                                 `^topk\(10, \(.*\) - on \(namespace, pod, container, probe_type\) \(.*` + regexp.QuoteMeta(kubeletSel) + `.*\) > 0\) or bottomk\(10, \(.*\) - on \(namespace, pod, container, probe_type\) \(.*\) < 0\)$`,
		"probes only probed runs":                                              `^topk\(20, count by \(namespace, pod, container, probe_type\) \(prober_probe_total\{job="probed".* unless on \(namespace, pod, container, probe_type\) count by \(namespace, pod, container, probe_type\) \(` + regexp.QuoteMeta(kubeletSel),
		"probes only the kubelet runs":                                         `^topk\(20, \(count by \(namespace, pod, container, probe_type\) \(` + regexp.QuoteMeta(kubeletSel) + `.* unless on `,
	}
	for what, re := range want {
		found := false
		for _, q := range shadow {
			found = found || regexp.MustCompile(re).MatchString(q.Expr)
		}
		if !found {
			t.Errorf("no shadow panel query shows %s (matching %s)", what, re)
		}
	}
	readsKubelet := map[string]bool{}
	for _, q := range shadow {
		// A probe that stopped running (a startup probe once it succeeded)
		// has a rate of 0: an unguarded ratio is 0/0 = NaN, and NaN != 0
		// would list it as a disagreement.
		if d, g := strings.Count(q.Expr, " / "), strings.Count(q.Expr, " / (sum by (namespace, pod, container, probe_type) (rate(prober_probe_total{"); d != g || d != strings.Count(q.Expr, "[$__rate_interval])) > 0)") {
			t.Errorf("%s/%s: a ratio whose denominator is not kept above 0 (NaN for a probe that stopped): %s", q.Panel, q.RefID, q.Expr)
		}
		readsKubelet[q.Panel] = readsKubelet[q.Panel] || strings.Contains(q.Expr, kubeletSel)
		for _, m := range grouping.FindAllStringSubmatch(q.Expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); !kubeletProbeLabels[l] {
					t.Errorf("%s/%s groups or joins on %q, which the kubelet's prober_probe_total does not have: %s", q.Panel, q.RefID, l, m[0])
				}
			}
		}
	}
	for panel, ok := range readsKubelet {
		if !ok {
			t.Errorf("panel %q does not read the kubelet's series (%s…)", panel, kubeletSel)
		}
	}
	if len(shadow) < 5 {
		t.Errorf("%d shadow panel queries, want at least 5", len(shadow))
	}
}

// Every dashboard query and variable query is valid PromQL: promtool parses
// them as recording rules, offline.
func TestDashboardQueriesParse(t *testing.T) {
	d, _, err := LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	rf := RuleFile{Groups: []RuleGroup{{Name: "dashboard"}}}
	add := func(what, expr string) {
		e, err := Substitute(expr, grafanaDurations, allValues(d))
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		rf.Groups[0].Rules = append(rf.Groups[0].Rules, Rule{Record: fmt.Sprintf("dashboard:query_%d", len(rf.Groups[0].Rules)), Expr: e})
	}
	for _, q := range d.Queries() {
		add(q.Panel+"/"+q.RefID, q.Expr)
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			add("variable "+v.Name, v.VariableQuery())
		}
	}
	b, err := yaml.Marshal(rf)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard.rules.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := promtool(t, t.TempDir(), "check", "rules", path)
	if err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}

// Every metric the alerts and the dashboard use is in docs/observability.md's
// metric tables, and so is every metric the Markdown files name.
func TestMetricsDocumented(t *testing.T) {
	docs, err := DocumentedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 15 {
		t.Fatalf("%d metrics in %s's table, want every one (at least 15)", len(docs), DocPath)
	}
	documented, histograms := map[string]bool{}, map[string]bool{}
	for _, m := range docs {
		documented[m.Name] = true
		histograms[m.Name] = m.Type == "histogram"
	}
	rules, err := LoadPlainRules()
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	used := map[string][]string{}
	for _, a := range rules.Alerts() {
		for _, n := range MetricNames(a.Expr, histograms) {
			used[n] = append(used[n], "alert "+a.Alert)
		}
	}
	for _, q := range d.Queries() {
		for _, n := range MetricNames(q.Expr, histograms) {
			used[n] = append(used[n], "panel "+q.Panel)
		}
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !documented[n] {
			t.Errorf("%s (used by %v) is not in %s's metric table", n, used[n], DocPath)
		}
	}
	// The docs name no metric the code does not define: a hand-written
	// table or a mention that outlived a rename would (the tables of
	// docs/observability.md are generated: cmd/probed's TestDocsMetrics).
	var prose []string
	for _, glob := range []string{"*.md", "docs/*.md", "docs/*/*.md", "charts/probed/*.md"} {
		m, err := filepath.Glob(RepoPath(glob))
		if err != nil {
			t.Fatal(err)
		}
		prose = append(prose, m...)
	}
	for _, f := range prose {
		if filepath.Base(f) == "CHANGELOG.md" {
			continue // history names what is gone
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range MetricNames(string(b), histograms) {
			if !documented[n] && !(strings.HasSuffix(n, "_") && documentedPrefix(documented, n)) {
				t.Errorf("%s names %s, which is not in %s's metric tables", strings.TrimPrefix(f, RepoPath(".")+"/"), n, DocPath)
			}
		}
	}
}

// documentedPrefix: a prefix the prose names (`probed_webhook_*`) starts
// some documented metric.
func documentedPrefix(documented map[string]bool, prefix string) bool {
	for n := range documented {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

func TestSubstitute(t *testing.T) {
	got, err := Substitute(`rate(x{a=~"$a", b=~"${b}", c="${c:raw}", d="[[d]]"}[$__rate_interval])`,
		map[string]string{"__rate_interval": "1m"}, map[string]string{"a": "A", "b": "B", "c": "C", "d": "D"})
	if err != nil || got != `rate(x{a=~"A", b=~"B", c="C", d="D"}[1m])` {
		t.Errorf("Substitute = %q, %v", got, err)
	}
	if _, err := Substitute(`x{a="$nope"}`, nil, nil); err == nil {
		t.Error("an unknown variable is not an error")
	}
	// The dashboard's own: every variable has a value, $__range a duration.
	d, _, err := LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	got, err = Substitute(`increase(x{pod=~"$pod", namespace=~"$namespace"}[$__range])`, grafanaDurations, allValues(d))
	if err != nil || got != `increase(x{pod=~".*", namespace=~".*"}[1h])` {
		t.Errorf("Substitute with the dashboard's variables = %q, %v", got, err)
	}
}

// kubectl kustomize (when kubectl is installed) builds deploy/monitoring into
// the PodMonitor, the PrometheusRule and the dashboard ConfigMap, all in
// probed's namespace.
func TestKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	out, err := exec.Command(kubectl, "kustomize", RepoPath("deploy/monitoring")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/monitoring: %v\n%s", err, out)
	}
	got := map[string]bool{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if m == nil {
			continue
		}
		got[fmt.Sprintf("%v/%v/%v", m["kind"], dig(m, "metadata", "namespace"), dig(m, "metadata", "name"))] = true
		if m["kind"] == "ConfigMap" {
			var d Dashboard
			if err := json.Unmarshal([]byte(fmt.Sprint(dig(m, "data", "grafana-dashboard.json"))), &d); err != nil || d.UID == "" {
				t.Errorf("the ConfigMap's dashboard does not parse: %v", err)
			}
		}
	}
	for _, want := range []string{"PodMonitor/probed-system/probed", "PrometheusRule/probed-system/probed", "ConfigMap/probed-system/probed-grafana-dashboard"} {
		if !got[want] {
			t.Errorf("kustomize output lacks %s; has %v", want, got)
		}
	}
}

// The PodMonitor's token Secret belongs to a service account that a
// ClusterRoleBinding binds to deploy/'s probed-metrics-reader, which grants
// get on /metrics.
func TestPodMonitorTokenMayGetMetrics(t *testing.T) {
	pm := readYAMLDocs(t, PodMonitorPath)[0]
	eps, _ := dig(pm, "spec", "podMetricsEndpoints").([]any)
	if len(eps) != 1 {
		t.Fatalf("%d podMetricsEndpoints, want 1", len(eps))
	}
	secret := dig(eps[0], "authorization", "credentials", "name")
	var account any
	bound := map[any][]any{} // service account -> cluster roles
	for _, d := range readYAMLDocs(t, "deploy/monitoring/scrape-token.yaml") {
		switch d["kind"] {
		case "Secret":
			if dig(d, "metadata", "name") == secret && d["type"] == "kubernetes.io/service-account-token" {
				account = dig(d, "metadata", "annotations", "kubernetes.io/service-account.name")
			}
		case "ClusterRoleBinding":
			subjects, _ := d["subjects"].([]any)
			for _, s := range subjects {
				if dig(s, "kind") == "ServiceAccount" && dig(s, "namespace") == dig(pm, "metadata", "namespace") {
					bound[dig(s, "name")] = append(bound[dig(s, "name")], dig(d, "roleRef", "name"))
				}
			}
		}
	}
	if account == nil {
		t.Fatalf("no service-account token Secret %v in deploy/monitoring/scrape-token.yaml", secret)
	}
	// The account may be bound to more roles (the webhook's); one of
	// them grants probed's /metrics.
	role := bound[account]
	granted := false
	for _, d := range readYAMLDocs(t, "deploy/scraper-roles.yaml") {
		if d["kind"] != "ClusterRole" || !slices.Contains(role, dig(d, "metadata", "name")) {
			continue
		}
		rules, _ := d["rules"].([]any)
		for _, r := range rules {
			urls, _ := dig(r, "nonResourceURLs").([]any)
			verbs, _ := dig(r, "verbs").([]any)
			if slices.Contains(urls, any("/metrics")) && slices.Contains(verbs, any("get")) {
				granted = true
			}
		}
	}
	if !granted {
		t.Errorf("service account %v is bound to %v, which does not grant get on /metrics in deploy/scraper-roles.yaml", account, role)
	}
}

// chartFiles are the chart's copies of deploy/monitoring's files.
var chartFiles = map[string]string{
	"charts/probed/files/prometheusrule.yaml":    PrometheusRulePath,
	"charts/probed/files/grafana-dashboard.json": DashboardPath,
}

// The chart's files/ are regular files, byte for byte deploy/monitoring's:
// a symbolic link breaks as soon as the chart directory is copied without
// the rest of the repository (a vendored chart, a chart repository, a
// GitOps tool's checkout of charts/probed), and helm package then fails.
func TestChartFilesInSync(t *testing.T) {
	for copyPath, src := range chartFiles {
		want, err := os.ReadFile(RepoPath(src))
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.Remove(RepoPath(copyPath)); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if err := os.WriteFile(RepoPath(copyPath), want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		st, err := os.Lstat(RepoPath(copyPath))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Mode().IsRegular() {
			t.Errorf("%s is a %v, not a regular file", copyPath, st.Mode().Type())
			continue
		}
		got, err := os.ReadFile(RepoPath(copyPath))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s; regenerate it:\n  go test ./test/monitoring/ -run 'TestPlainRulesInSync|TestChartFilesInSync' -update", copyPath, src)
		}
	}
}

// Adoption fails open by design, so an alert says when it does: on the API
// server's fail-open counter, for every webhook deploy/webhook/admission.yaml
// registers (and no other), and on the webhook certificate's expiry, from
// the webhook's rotation and from cert-manager.
func TestWebhookFailureAlerts(t *testing.T) {
	f, err := LoadPlainRules()
	if err != nil {
		t.Fatal(err)
	}
	alerts := map[string]Rule{}
	for _, a := range f.Alerts() {
		alerts[a.Alert] = a
	}
	open, ok := alerts["ProbedWebhookFailingOpen"]
	if !ok || !strings.Contains(open.Expr, "apiserver_admission_webhook_fail_open_count") {
		t.Fatalf("no ProbedWebhookFailingOpen alert on apiserver_admission_webhook_fail_open_count: %+v", open)
	}
	m := regexp.MustCompile(`name=~"([^"]+)"`).FindStringSubmatch(open.Expr)
	if m == nil {
		t.Fatalf("ProbedWebhookFailingOpen selects no webhook names: %s", open.Expr)
	}
	names := regexp.MustCompile("^(?:" + strings.ReplaceAll(m[1], `\\`, `\`) + ")$")
	var registered []string
	for _, doc := range readYAMLDocs(t, "deploy/webhook/admission.yaml") {
		whs, _ := doc["webhooks"].([]any)
		for _, wh := range whs {
			registered = append(registered, wh.(map[string]any)["name"].(string))
		}
	}
	if len(registered) < 4 {
		t.Fatalf("webhooks in deploy/webhook/admission.yaml: %v", registered)
	}
	for _, n := range registered {
		if !names.MatchString(n) {
			t.Errorf("ProbedWebhookFailingOpen misses the webhook %s", n)
		}
	}
	for _, other := range []string{"inject.example.com", "probed.io.example.com"} {
		if names.MatchString(other) {
			t.Errorf("ProbedWebhookFailingOpen takes %s for probed's", other)
		}
	}
	cert, ok := alerts["ProbedWebhookCertificateExpiring"]
	if !ok || !strings.Contains(cert.Expr, "probed_webhook_certificate_expiry_timestamp_seconds") ||
		!strings.Contains(cert.Expr, "certmanager_certificate_expiration_timestamp_seconds") {
		t.Errorf("no ProbedWebhookCertificateExpiring alert on both certificate sources: %+v", cert)
	}
}
