// Package monitoring reads what deploy/monitoring ships, for tests: the
// alert rules, the Grafana dashboard's queries, and the metric table of
// docs/observability.md. Its own tests check them offline (structure,
// promtool check rules, promtool test rules); test/integration runs the
// dashboard's queries and the rules against a real Prometheus scraping a
// real probed.
package monitoring

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/test/harness/repo"
)

// Paths of the shipped files, relative to the repository root.
const (
	PrometheusRulePath = "deploy/monitoring/prometheusrule.yaml"
	PlainRulesPath     = "deploy/monitoring/rules/probed.rules.yaml"
	PodMonitorPath     = "deploy/monitoring/podmonitor.yaml"
	KustomizationPath  = "deploy/monitoring/kustomization.yaml"
	DashboardPath      = "deploy/monitoring/grafana-dashboard.json"
	DocPath            = "docs/observability.md"
	RunbooksPath       = "deploy/monitoring/runbooks.yaml"
	// Home is the project's repository; a release is its tag v<VERSION>.
	Home = "https://github.com/probed-dev/probed"
)

// ReleaseDoc is where the repository-relative file rel is read online as
// the release this checkout prepares (VERSION) ships it: at its tag.
func ReleaseDoc(rel string) (string, error) {
	v, err := os.ReadFile(RepoPath("VERSION"))
	if err != nil {
		return "", err
	}
	return Home + "/blob/v" + strings.TrimSpace(string(v)) + "/" + rel, nil
}

// RunbookBase is where every alert's runbook_url points, plus "#<alert
// name in lower case>", the heading's anchor: docs/observability.md as
// the release ships it.
func RunbookBase() (string, error) { return ReleaseDoc(DocPath) }

// RepoPath turns a repository-relative path into an absolute one.
func RepoPath(rel string) string {
	root, err := repo.Root()
	if err != nil {
		panic(err)
	}
	return filepath.Join(root, filepath.FromSlash(rel))
}

// RuleFile is a Prometheus rule file (and a PrometheusRule's spec).
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is one group of rules.
type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []Rule `json:"rules"`
}

// Rule is an alerting or recording rule.
type Rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Alerts are the file's alerting rules.
func (f *RuleFile) Alerts() []Rule {
	var out []Rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// LoadPlainRules reads the plain rule file.
func LoadPlainRules() (*RuleFile, error) {
	b, err := os.ReadFile(RepoPath(PlainRulesPath))
	if err != nil {
		return nil, err
	}
	var f RuleFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", PlainRulesPath, err)
	}
	return &f, nil
}

// PlainRulesHeader starts the generated plain rule file.
const PlainRulesHeader = `# Code generated from ../prometheusrule.yaml (its spec) by
#   go test ./test/monitoring/ -run TestPlainRulesInSync -update
# DO NOT EDIT. A plain Prometheus rule file, for promtool and for Prometheus
# servers without the Prometheus Operator (rule_files).
`

// GeneratePlainRules renders the PrometheusRule's spec as the plain rule
// file, byte for byte.
func GeneratePlainRules() ([]byte, error) {
	b, err := os.ReadFile(RepoPath(PrometheusRulePath))
	if err != nil {
		return nil, err
	}
	var cr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Spec       map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &cr); err != nil {
		return nil, fmt.Errorf("%s: %w", PrometheusRulePath, err)
	}
	if cr.APIVersion != "monitoring.coreos.com/v1" || cr.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%s: %s %s, want monitoring.coreos.com/v1 PrometheusRule", PrometheusRulePath, cr.APIVersion, cr.Kind)
	}
	out, err := yaml.Marshal(cr.Spec)
	if err != nil {
		return nil, err
	}
	return append([]byte(PlainRulesHeader), out...), nil
}

// Dashboard is the part of Grafana's dashboard JSON model the tests read.
type Dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []Panel `json:"panels"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel; a row holds its panels only when collapsed.
type Panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	GridPos    *GridPos    `json:"gridPos"`
	Datasource *Datasource `json:"datasource"`
	Targets    []Target    `json:"targets"`
	Panels     []Panel     `json:"panels"`
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Datasource references a data source, here the $datasource variable.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Target is one query of a panel.
type Target struct {
	RefID        string      `json:"refId"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
	Instant      bool        `json:"instant"`
	Datasource   *Datasource `json:"datasource"`
}

// Variable is a template variable.
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
	Multi      bool            `json:"multi"`
	Datasource *Datasource     `json:"datasource"`
}

// LoadDashboard reads the dashboard JSON.
func LoadDashboard() (*Dashboard, []byte, error) {
	b, err := os.ReadFile(RepoPath(DashboardPath))
	if err != nil {
		return nil, nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, b, fmt.Errorf("%s: %w", DashboardPath, err)
	}
	return &d, b, nil
}

// AllPanels are the dashboard's panels, those in collapsed rows included.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// Query is one panel query.
type Query struct {
	Panel, RefID, Expr string
}

// Queries are every target expression of the dashboard's panels.
func (d *Dashboard) Queries() []Query {
	var out []Query
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			out = append(out, Query{Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
		}
	}
	return out
}

var varRef = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// Substitute replaces Grafana's variables in expr: $__rate_interval,
// $__interval and $__range by the given durations, template variables
// ($v, ${v}, ${v:fmt}, [[v]]) from vars. An unknown variable is an error.
func Substitute(expr string, durations, vars map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(expr, func(m string) string {
		sub := varRef.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		if v, ok := durations[name]; ok {
			return v
		}
		if v, ok := vars[name]; ok {
			return v
		}
		missing = append(missing, name)
		return m
	})
	if len(missing) > 0 {
		return out, fmt.Errorf("unknown variables %v in %q", missing, expr)
	}
	return out, nil
}

// VariableQuery is a query variable's PromQL: the series selector of
// label_values(<selector>, <label>), or the query itself.
func (v Variable) VariableQuery() string {
	q := v.Definition
	if q == "" {
		var s string
		var o struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &s) == nil {
			q = s
		} else if json.Unmarshal(v.Query, &o) == nil {
			q = o.Query
		}
	}
	q = strings.TrimSpace(q)
	if strings.HasPrefix(q, "label_values(") && strings.HasSuffix(q, ")") {
		inner := strings.TrimSuffix(strings.TrimPrefix(q, "label_values("), ")")
		if i := strings.LastIndex(inner, ","); i >= 0 {
			return strings.TrimSpace(inner[:i])
		}
		return "" // label_values(label): no PromQL
	}
	return q
}

// DocMetric is one row of docs/observability.md's metric table.
type DocMetric struct {
	Name   string
	Type   string // counter, gauge or histogram
	Labels []string
}

var docRow = regexp.MustCompile("^\\| `((?:probed|prober)_[a-z_]+)` \\| (counter|gauge|histogram) \\| ([^|]*)\\|")
var backticked = regexp.MustCompile("`([a-z_]+)`")

// DocumentedMetrics parses the metric table of docs/observability.md: rows
// "| `name` | type | `label`, `label` | ...".
func DocumentedMetrics() ([]DocMetric, error) {
	f, err := os.Open(RepoPath(DocPath))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []DocMetric
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := docRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		dm := DocMetric{Name: m[1], Type: m[2]}
		for _, l := range backticked.FindAllStringSubmatch(m[3], -1) {
			dm.Labels = append(dm.Labels, l[1])
		}
		sort.Strings(dm.Labels)
		out = append(out, dm)
	}
	return out, sc.Err()
}

var metricName = regexp.MustCompile(`\b(?:probed|prober)_[a-z_]+`)

// MetricNames are the probed_* and prober_* metric names expr refers to,
// with a histogram's _bucket, _sum and _count suffix taken off when the
// rest is a documented histogram.
func MetricNames(expr string, histograms map[string]bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range metricName.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base := strings.TrimSuffix(n, suffix); base != n && histograms[base] {
				n = base
				break
			}
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
