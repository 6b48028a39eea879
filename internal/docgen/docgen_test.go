package docgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/probed-dev/probed/internal/flagschema"
)

func TestRegionReplaceAndSync(t *testing.T) {
	doc := "# T\n\n<!-- BEGIN GENERATED x: go test -update -->\nold\n<!-- END GENERATED x -->\n\nafter\n"
	got, err := Replace([]byte(doc), Region{Name: "x", Body: "| a |\n"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "# T\n\n<!-- BEGIN GENERATED x: go test -update -->\n| a |\n<!-- END GENERATED x -->\n\nafter\n"; string(got) != want {
		t.Errorf("Replace = %q, want %q", got, want)
	}
	for name, bad := range map[string]string{
		"no markers":    "# T\n",
		"two begins":    "<!-- BEGIN GENERATED x: a -->\n<!-- BEGIN GENERATED x: b -->\n<!-- END GENERATED x -->\n",
		"end first":     "<!-- END GENERATED x -->\n<!-- BEGIN GENERATED x: a -->\n",
		"mid-line":      "text <!-- BEGIN GENERATED x: a -->\n<!-- END GENERATED x -->\n",
		"no end marker": "<!-- BEGIN GENERATED x: a -->\nbody\n",
	} {
		if _, err := Replace([]byte(bad), Region{Name: "x"}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}

	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	err = Sync(path, false, "go test ./x -update", Region{Name: "x", Body: "new\n"})
	if err == nil || !strings.Contains(err.Error(), `line 1 is "old", want "new"`) || !strings.Contains(err.Error(), "go test ./x -update") {
		t.Errorf("Sync of a stale region: %v", err)
	}
	if err := Sync(path, true, "", Region{Name: "x", Body: "new\n"}); err != nil {
		t.Fatal(err)
	}
	if err := Sync(path, false, "", Region{Name: "x", Body: "new"}); err != nil {
		t.Errorf("Sync after -update: %v", err)
	}
}

func TestFlagTable(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var mode, s string
	var n int
	var d time.Duration
	flagschema.EnumVar(fs, &mode, "mode", "a", "which | one", "a", "b")
	flagschema.IntVar(fs, &n, "count", 2, 1, "how many <things>")
	fs.StringVarP(&s, "name", "n", "", "a *name*")
	fs.DurationVar(&d, "wait", time.Minute, "how long")
	fs.Bool("secret", false, "hidden")
	if err := fs.MarkHidden("secret"); err != nil {
		t.Fatal(err)
	}
	want := "| flag | takes | default | description |\n|---|---|---|---|\n" +
		"| `--count` | int ≥ 1 | `2` | how many &lt;things&gt; |\n" +
		"| `--mode` | `a`, `b` | `a` | which \\| one |\n" +
		"| `-n`, `--name` | string |  | a \\*name\\* |\n" +
		"| `--wait` | duration | `1m0s` | how long |\n"
	if got := FlagTable(fs); got != want {
		t.Errorf("FlagTable =\n%s\nwant\n%s", got, want)
	}
}

func TestParseDesc(t *testing.T) {
	for _, c := range []struct {
		desc   *prometheus.Desc
		name   string
		help   string
		labels []string
	}{
		{prometheus.NewDesc("a_total", `help with "quotes", {braces} and a, comma`, []string{"x", "y"}, nil), "a_total", `help with "quotes", {braces} and a, comma`, []string{"x", "y"}},
		{prometheus.NewDesc("b", "h", nil, prometheus.Labels{"k": "v,w"}), "b", "h", []string{"k"}},
		{prometheus.V2.NewDesc("c", "h", prometheus.ConstrainedLabels{{Name: "l", Constraint: strings.ToLower}}, nil), "c", "h", []string{"l"}},
	} {
		d, err := parseDesc(c.desc.String())
		if err != nil {
			t.Fatal(err)
		}
		if d.name != c.name || d.help != c.help || strings.Join(d.labels, ",") != strings.Join(c.labels, ",") {
			t.Errorf("parseDesc(%s) = %+v", c.desc, d)
		}
	}
	if _, err := parseDesc("something else"); err == nil {
		t.Error("parseDesc of a string that is no descriptor: no error")
	}
}

// quiet is a collector of the binary's own with no series at rest.
type quiet struct{ desc *prometheus.Desc }

func (q quiet) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }
func (quiet) Collect(chan<- prometheus.Metric)      {}

func TestFamilies(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "p_total", Help: "c"}, []string{"b", "a"}))
	r.MustRegister(prometheus.NewHistogram(prometheus.HistogramOpts{Name: "p_seconds", Help: "h"}))
	r.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "other", Help: "g"}))
	got, err := r.Families("p_")
	if err != nil {
		t.Fatal(err)
	}
	want := "| metric | type | labels | help |\n|---|---|---|---|\n" +
		"| `p_seconds` | histogram |  | h |\n" +
		"| `p_total` | counter | `b`, `a` | c |\n"
	if table := MetricTable(got); table != want {
		t.Errorf("MetricTable =\n%s\nwant\n%s", table, want)
	}
	r.MustRegister(quiet{prometheus.NewDesc("p_quiet", "q", nil, nil)})
	if _, err := r.Families("p_"); err == nil || !strings.Contains(err.Error(), "p_quiet") {
		t.Errorf("Families with a collector that has no series: %v", err)
	}
}

func TestSlug(t *testing.T) {
	for text, want := range map[string]string{
		"The probe host policy (--probe-host-policy)":         "the-probe-host-policy---probe-host-policy",
		"On Kubernetes 1.33 or 1.34 (end of life)":            "on-kubernetes-133-or-134-end-of-life",
		"What a pod's author, a namespace editor and a…":      "what-a-pods-author-a-namespace-editor-and-a",
		"One probed on a 110-pod node (issue 23's footprint)": "one-probed-on-a-110-pod-node-issue-23s-footprint",
		"snake_case stays": "snake_case-stays",
		"Déjà vu":          "déjà-vu",
	} {
		if got := Slug(text); got != want {
			t.Errorf("Slug(%q) = %q, want %q", text, got, want)
		}
	}
	s := Slugger{}
	for i, want := range []string{"notes", "notes-1", "notes-2"} {
		if got := s.Slug("Notes"); got != want {
			t.Errorf("heading %d: %q, want %q", i, got, want)
		}
	}
}

func TestSectionAndNotes(t *testing.T) {
	doc := "# T\n## a\n- **`--x`**: one\n```sh\n## not a heading\n```\n### sub\n- **`--y`**, **`--z`**: two\n## b\n- **`--w`**: three\n"
	sec, err := Section([]byte(doc), "## a")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(Noted(sec), " "); got != "--x --y --z" {
		t.Errorf("Noted under ## a = %q", got)
	}
	if _, err := Section([]byte(doc), "## c"); err == nil {
		t.Error("Section of a heading that is not there: no error")
	}
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.Bool("x", false, "")
	fs.Bool("y", false, "")
	if err := CheckNoted(path, "## a", FlagKnown(fs)); err == nil || !strings.Contains(err.Error(), "--z") || strings.Contains(err.Error(), "--y") {
		t.Errorf("CheckNoted with --z unknown: %v", err)
	}
}
