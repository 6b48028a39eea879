package docgen

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Registry is a prometheus.Registerer that keeps what a binary registers
// with it, so that its metric families can be described: pass it where
// the binary passes its registry.
type Registry struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{Registry: prometheus.NewRegistry()}
}

// Register implements prometheus.Registerer.
func (r *Registry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister implements prometheus.Registerer.
func (r *Registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Family is one metric family as the docs list it.
type Family struct {
	Name string
	// Type is counter, gauge, histogram, summary or untyped.
	Type string
	Help string
	// Labels are the family's labels in the order the code declares them.
	Labels []string
}

// Families describes every family registered whose name starts with one of
// prefixes, sorted by name. Names, help and labels come from the
// collectors' descriptors; the type from a gather, which needs a series of
// each family. The client's vectors (CounterVec, GaugeVec, HistogramVec,
// SummaryVec) get one here, with placeholder label values; a collector of
// the binary's own that has none at rest must be given one before (run
// what fills it), or Families fails naming it.
func (r *Registry) Families(prefixes ...string) ([]Family, error) {
	described := map[string]Family{}
	for _, c := range r.collectors {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		var descs []desc
		for d := range ch {
			pd, err := parseDesc(d.String())
			if err != nil {
				return nil, err
			}
			descs = append(descs, pd)
		}
		if len(descs) == 1 {
			if err := addSeries(c, len(descs[0].labels)); err != nil {
				return nil, fmt.Errorf("%s: %w", descs[0].name, err)
			}
		}
		for _, d := range descs {
			if hasPrefix(d.name, prefixes) {
				described[d.name] = Family{Name: d.name, Help: d.help, Labels: d.labels}
			}
		}
	}
	mfs, err := r.Gather()
	if err != nil {
		return nil, err
	}
	types := map[string]dto.MetricType{}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType()
	}
	out := make([]Family, 0, len(described))
	var missing []string
	for name, f := range described {
		t, ok := types[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		f.Type = strings.ToLower(t.String())
		out = append(out, f)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("no series of %s to read the type from: give its collector one before describing it", strings.Join(missing, ", "))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func hasPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return len(prefixes) == 0
}

// addSeries gives one of the client's vectors a child, so that a gather
// has its family; other collectors are left alone.
func addSeries(c prometheus.Collector, labels int) error {
	lv := make([]string, labels)
	for i := range lv {
		lv[i] = "docgen"
	}
	var err error
	switch v := c.(type) {
	case *prometheus.CounterVec:
		_, err = v.GetMetricWithLabelValues(lv...)
	case *prometheus.GaugeVec:
		_, err = v.GetMetricWithLabelValues(lv...)
	case *prometheus.HistogramVec:
		_, err = v.GetMetricWithLabelValues(lv...)
	case *prometheus.SummaryVec:
		_, err = v.GetMetricWithLabelValues(lv...)
	}
	return err
}

// desc is what a *prometheus.Desc says of its family.
type desc struct {
	name, help string
	labels     []string
}

// parseDesc reads Desc.String(), the only way the client shows a
// descriptor's name, help and labels:
//
//	Desc{fqName: "a", help: "b", unit: "", constLabels: {k="v"}, variableLabels: {l,c(m)}}
//
// c(m) is a label with a constraint. Constant labels are listed after the
// variable ones.
func parseDesc(s string) (desc, error) {
	bad := func(why string) (desc, error) {
		return desc{}, fmt.Errorf("cannot read the descriptor %s: %s", s, why)
	}
	rest, ok := strings.CutPrefix(s, `Desc{fqName: `)
	if !ok {
		return bad("no fqName")
	}
	var d desc
	var err error
	if d.name, rest, err = unquotePrefix(rest); err != nil {
		return bad(err.Error())
	}
	if rest, ok = strings.CutPrefix(rest, `, help: `); !ok {
		return bad("no help")
	}
	if d.help, rest, err = unquotePrefix(rest); err != nil {
		return bad(err.Error())
	}
	// client_golang 1.23 added the unit.
	if after, ok := strings.CutPrefix(rest, `, unit: `); ok {
		if _, rest, err = unquotePrefix(after); err != nil {
			return bad(err.Error())
		}
	}
	if rest, ok = strings.CutPrefix(rest, `, constLabels: {`); !ok {
		return bad("no constLabels")
	}
	constPart, rest, ok := strings.Cut(rest, `}, variableLabels: {`)
	if !ok {
		return bad("no variableLabels")
	}
	varPart, ok := strings.CutSuffix(rest, `}}`)
	if !ok {
		return bad("no closing braces")
	}
	for _, l := range strings.Split(varPart, ",") {
		if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
			d.labels = append(d.labels, l)
		}
	}
	for constPart != "" {
		name, after, ok := strings.Cut(constPart, "=")
		if !ok {
			return bad("a constant label without a value")
		}
		d.labels = append(d.labels, name)
		if _, after, err = unquotePrefix(after); err != nil {
			return bad(err.Error())
		}
		constPart = strings.TrimPrefix(after, ",")
	}
	if d.name == "" {
		return bad("an empty name")
	}
	return d, nil
}

// unquotePrefix reads the Go-quoted string s starts with.
func unquotePrefix(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", errors.New("not a quoted string")
	}
	v, err := strconv.Unquote(q)
	return v, s[len(q):], err
}

// MetricTable is a Markdown table of families: name, type, labels and help.
// test/monitoring's DocumentedMetrics reads its rows back.
func MetricTable(families []Family) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | help |\n|---|---|---|---|\n")
	for _, f := range families {
		labels := make([]string, len(f.Labels))
		for i, l := range f.Labels {
			labels[i] = Code(l)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", Code(f.Name), f.Type, strings.Join(labels, ", "), Cell(f.Help))
	}
	return b.String()
}
