package main

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/probed-dev/probed/internal/cliflags"
	"github.com/probed-dev/probed/internal/flagschema"
)

// helmSchema compiles values.schema.json as Helm (3.22, the version CI
// runs) does before it renders: santhosh-tekuri/jsonschema v6, the
// schema's own draft.
func helmSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(chartSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("file:///values.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("file:///values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// chartDefaults is values.yaml as Helm reads it (numbers are float64).
func chartDefaults(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(chartValuesPath)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// renderFlag is the chart's probed.flagValue: a whole number without an
// exponent, anything else as Go prints it.
func renderFlag(v any) string {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return fmt.Sprint(int64(f))
	}
	return fmt.Sprint(v)
}

// chartArgs are the arguments the chart gives probed for these flags: each
// one not null, as --name=value (-v=N for the verbosity).
func chartArgs(flags map[string]any) []string {
	var args []string
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if flags[name] == nil {
			continue
		}
		dash := "--"
		if name == "v" {
			dash = "-"
		}
		args = append(args, dash+name+"="+renderFlag(flags[name]))
	}
	return args
}

// probedRefuses is what probed says of these arguments at start: its flags'
// parsing, component-base's logging validation and its own options'
// validation (main's order), without starting anything. nil: it would run.
func probedRefuses(args []string) error {
	o := &options{}
	fs, logging, _ := newFlagSet(o)
	if err := cliflags.Parse(fs, args); err != nil {
		return err
	}
	if errs := logsapi.Validate(logging, nil, nil); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return o.validate()
}

// flagKind is what kind of value a flag takes: bool, int, float, duration
// or string (enums included).
func flagKind(v pflag.Value) string {
	if d, ok := v.(flagschema.Described); ok {
		v = d.Value
	}
	if b, ok := v.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return "bool"
	}
	typ := reflect.TypeOf(v).String()
	if t, ok := v.(interface{ Type() string }); ok {
		typ = t.Type()
	}
	switch typ = strings.ToLower(typ); {
	case strings.Contains(typ, "bool"):
		return "bool"
	case strings.Contains(typ, "duration"):
		return "duration"
	case strings.Contains(typ, "float"):
		return "float"
	case strings.Contains(typ, "int") || typ == "level":
		return "int"
	}
	return "string"
}

// edgeValues are the values tried on every flag of a kind: the values
// Helm gives a template, from a values file (numbers as float64) or --set
// (whole numbers as int64, everything else but true, false and null a
// string). A value of another kind than the flag's is left out: the schema
// refuses it by type (a count given as text, a path given as a number),
// whatever probed would make of its text; quote or unquote it.
func edgeValues(kind string, enum []string) []any {
	numbers := []any{int64(-1), int64(0), int64(1), int64(7), int64(60), int64(2147483647), int64(2147483648),
		float64(0), float64(1), float64(2.5), float64(-0.5), float64(0.001)}
	texts := []any{"", "0", "1", "-1", "+1", "2.5", ".5", "0.0", "1e3", "Inf", "NaN", "x", "true",
		"0s", "-0s", "+0s", "1ns", "1s", "-1s", "+1s", "500ms", "1h30m", "1.5h", "45",
		"127.0.0.1:9809", ":9809", "worker=5", "worker=5,manager=3", "worker=-1", "=5"}
	for _, e := range enum {
		texts = append(texts, e, strings.ToUpper(e))
	}
	switch kind {
	case "bool":
		return []any{true, false}
	case "int":
		return numbers
	case "float", "duration":
		return append(numbers, texts...)
	}
	return texts
}

// The chart's schema and probed agree on every flag's edge values: a value
// helm install accepts (values.yaml with that flag set) starts probed with
// the arguments the chart renders, and a value probed would refuse at start
// is refused by helm first. Each flag alone, then the pairs that
// options.validate and component-base check together (the schema's
// if/then rules).
func TestChartSchemaAgreesWithProbed(t *testing.T) {
	t.Setenv("NODE_NAME", "node-1") // the DaemonSet's downward API
	schema := helmSchema(t)
	defaults := chartDefaults(t)
	if err := schema.Validate(defaults); err != nil {
		t.Fatalf("values.yaml fails its own schema: %v", err)
	}
	checks := 0
	check := func(set map[string]any) {
		t.Helper()
		values := maps.Clone(defaults)
		flags := maps.Clone(defaults["flags"].(map[string]any))
		maps.Copy(flags, set)
		values["flags"] = flags
		schemaErr := schema.Validate(values)
		args := chartArgs(flags)
		probedErr := probedRefuses(args)
		checks++
		switch {
		case schemaErr == nil && probedErr != nil:
			t.Errorf("flags %v: the schema accepts them, probed refuses %q: %v", set, args, probedErr)
		case schemaErr != nil && probedErr == nil:
			t.Errorf("flags %v: probed accepts %q, the schema refuses them: %v", set, args, schemaErr)
		}
	}

	fs, _ := chartFlags(t)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "version" {
			return
		}
		var enum []string
		if e, ok := f.Value.(flagschema.Enum); ok {
			enum = e.Allowed()
		}
		for _, v := range edgeValues(flagKind(f.Value), enum) {
			check(map[string]any{f.Name: v})
		}
	})

	type m = map[string]any
	for _, pair := range []m{
		{"logging-format": "json", "vmodule": "worker=5"},
		{"logging-format": "json", "vmodule": ""},
		{"logging-format": "text", "vmodule": "worker=5"},
		{"tls-cert-file": "/tls/tls.crt", "tls-private-key-file": "/tls/tls.key"},
		{"tls-cert-file": "/tls/tls.crt", "tls-private-key-file": ""},
		{"tls-cert-file": "", "tls-private-key-file": "/tls/tls.key"},
		{"metrics-insecure-serving": true, "metrics-bind-address": "127.0.0.1:9809"},
		{"metrics-insecure-serving": true, "metrics-bind-address": "127.1.2.3:0"},
		{"metrics-insecure-serving": true, "metrics-bind-address": "[::1]:9809"},
		{"metrics-insecure-serving": true, "metrics-bind-address": "localhost:9809"},
		{"metrics-insecure-serving": true, "metrics-bind-address": "0.0.0.0:9809"},
		{"metrics-insecure-serving": true, "metrics-bind-address": "127.0.0.01:9809"},
		{"metrics-insecure-serving": true, "metrics-bind-address": nil},
		{"metrics-insecure-serving": true, "metrics-bind-address": "127.0.0.1:9809", "tls-cert-file": "/c", "tls-private-key-file": "/k"},
		{"metrics-insecure-serving": false, "metrics-bind-address": "0.0.0.0:9809"},
	} {
		check(pair)
	}
	t.Logf("%d sets of flags, each through the schema and through probed", checks)
}
