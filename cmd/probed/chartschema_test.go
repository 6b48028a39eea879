package main

import (
	"bytes"
	"flag"
	"os"
	"slices"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/internal/chartschema"
	"github.com/probed-dev/probed/internal/flagschema"
	"github.com/probed-dev/probed/internal/logflags"
)

//go:generate go test -run TestChartValuesSchema -update .

var update = flag.Bool("update", false, "rewrite "+chartSchemaPath+" from probed's flags and internal/chartschema")

const (
	chartSchemaPath = "../../charts/probed/values.schema.json"
	chartValuesPath = "../../charts/probed/values.yaml"
)

// chartFlags describes probed's own flag set, as main builds it.
func chartFlags(t *testing.T) (*pflag.FlagSet, map[string]any) {
	t.Helper()
	fs, _, _ := newFlagSet(&options{})
	props, err := flagschema.Properties(fs, "version")
	if err != nil {
		t.Fatal(err)
	}
	return fs, props
}

// values.schema.json is generated from probed's flag set (every flag,
// typed: enums, ranges, durations) and the chart's values
// (internal/chartschema): a flag added, removed or changed shows here.
func TestChartValuesSchema(t *testing.T) {
	_, props := chartFlags(t)
	// The webhook registers its logging flags with logflags.Add too.
	wfs := pflag.NewFlagSet("probed-webhook", pflag.ContinueOnError)
	logflags.Add(wfs)
	v, err := flagschema.Of(wfs.Lookup("v").Value)
	if err != nil {
		t.Fatal(err)
	}
	want, err := chartschema.Generate(props, v)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(chartSchemaPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(chartSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("charts/probed/values.schema.json is not what probed's flags and internal/chartschema say; regenerate it:\n" +
			"  go test ./cmd/probed/ -run TestChartValuesSchema -update")
	}
}

// values.yaml lists exactly probed's flags, each null (probed's default)
// or a value of its type.
func TestChartValuesListEveryFlag(t *testing.T) {
	fs, _ := chartFlags(t)
	b, err := os.ReadFile(chartValuesPath)
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Flags map[string]any `json:"flags"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "version" {
			return
		}
		names = append(names, f.Name)
		if _, ok := values.Flags[f.Name]; !ok {
			t.Errorf("probed has --%s; charts/probed/values.yaml's flags lack it", f.Name)
		}
	})
	for name := range values.Flags {
		if !slices.Contains(names, name) {
			t.Errorf("charts/probed/values.yaml's flags have %s; probed has no such flag", name)
		}
	}
}
