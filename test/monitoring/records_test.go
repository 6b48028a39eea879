package monitoring

import (
	"regexp"
	"strings"
	"testing"
)

var (
	// recordedName is a recording rule's level:metric:operations name.
	recordedName = regexp.MustCompile(`\b[a-z_]+:[a-z_]+:[a-z0-9_]+\b`)
	// recordedSelector is a recorded series with its label matchers.
	recordedSelector = regexp.MustCompile(`\b([a-z_]+:[a-z_]+:[a-z0-9_]+)\{([^}]*)\}`)
	// sumBy is a recording rule's outer aggregation and the labels it keeps.
	sumBy        = regexp.MustCompile(`^sum by \(([^)]*)\) \(rate\(((?:prober|probed)_[a-z_]+)\{job="probed"\}\[5m\]\)\)$`)
	matcherLabel = regexp.MustCompile(`([a-z_]+)\s*(?:=~|!=|!~|=)`)
	// rawProber is a selector of a raw per-pod series (not a recorded one).
	rawProber = regexp.MustCompile(`(?:^|[^:a-z_])prober_probe_[a-z_]+\{`)
)

// fleetWidePanels read the recording rules, never the per-pod series: on a
// fleet these panels and the namespace variable would otherwise sum millions
// of series at every refresh.
var fleetWidePanels = []string{"Failed probes /s", "Probe results by type", "Probe duration"}

// The dashboard reads what the recording rules record: every recorded name
// it uses is a rule of the shipped rule file, filtered only by labels the
// rule keeps; every rule is read; each rule sums a documented metric; the
// fleet-wide panels and the namespace variable read recorded series only.
// promtool check rules parses the rules (TestRulesPromtoolCheck), rules_test.yaml
// checks their values, and TestDashboardBoundedOnAFleet evaluates the panels
// on them.
func TestDashboardReadsRecordedSeries(t *testing.T) {
	rules, err := LoadPlainRules()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := DocumentedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range docs {
		documented[m.Name] = true
		if m.Type == "histogram" {
			documented[m.Name+"_bucket"] = true
		}
	}
	kept := map[string]map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record == "" {
				continue
			}
			if _, dup := kept[r.Record]; dup {
				t.Errorf("%s recorded twice", r.Record)
			}
			m := sumBy.FindStringSubmatch(strings.TrimSpace(r.Expr))
			if m == nil {
				t.Errorf("%s: %q is not sum by (...) (rate(<metric>{job=\"probed\"}[5m]))", r.Record, r.Expr)
				continue
			}
			if parts := strings.Split(r.Record, ":"); len(parts) != 3 || parts[1] != m[2] || parts[2] != "rate5m" {
				t.Errorf("%s records rate(%s[5m]): want the name <level>:%s:rate5m", r.Record, m[2], m[2])
			}
			if !documented[m[2]] {
				t.Errorf("%s sums %s, which is not in %s's metric table", r.Record, m[2], DocPath)
			}
			kept[r.Record] = map[string]bool{}
			for _, l := range strings.Split(m[1], ",") {
				kept[r.Record][strings.TrimSpace(l)] = true
			}
		}
	}
	if len(kept) == 0 {
		t.Fatalf("no recording rules in %s", PlainRulesPath)
	}

	d, _, err := LoadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	type use struct{ where, expr string }
	var uses []use
	for _, q := range d.Queries() {
		uses = append(uses, use{q.Panel + "/" + q.RefID, q.Expr})
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			uses = append(uses, use{"variable " + v.Name, v.VariableQuery()})
		}
		if v.Name == "namespace" && !recordedName.MatchString(v.VariableQuery()) {
			t.Errorf("variable namespace: %q, want the namespaces of a recorded series", v.VariableQuery())
		}
	}
	read := map[string]bool{}
	for _, u := range uses {
		for _, n := range recordedName.FindAllString(u.expr, -1) {
			if kept[n] == nil {
				t.Errorf("%s reads %s, which no recording rule in %s records", u.where, n, PlainRulesPath)
			}
			read[n] = true
		}
		for _, s := range recordedSelector.FindAllStringSubmatch(u.expr, -1) {
			for _, l := range matcherLabel.FindAllStringSubmatch(s[2], -1) {
				if kept[s[1]] != nil && !kept[s[1]][l[1]] {
					t.Errorf("%s filters %s on %s, a label the rule does not keep", u.where, s[1], l[1])
				}
			}
		}
	}
	for n := range kept {
		if !read[n] {
			t.Errorf("recording rule %s is read by no dashboard query", n)
		}
	}
	for _, title := range fleetWidePanels {
		found := false
		for _, q := range d.Queries() {
			if q.Panel != title {
				continue
			}
			found = true
			if rawProber.MatchString(q.Expr) || !recordedName.MatchString(q.Expr) {
				t.Errorf("panel %q/%s reads the per-pod series, not a recorded one: %s", q.Panel, q.RefID, q.Expr)
			}
		}
		if !found {
			t.Errorf("no panel %q", title)
		}
	}
}
