package flagschema

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// The duration patterns accept what time.ParseDuration accepts (and, for
// the positive one, only above zero), and nothing else.
func TestDurationPatterns(t *testing.T) {
	anyD, positive := regexp.MustCompile(DurationPattern), regexp.MustCompile(PositiveDurationPattern)
	nonNegative := regexp.MustCompile(NonNegativeDurationPattern)
	for _, s := range []string{"0", "1s", "1m30s", "1.5h", ".5s", "5.s", "+3ms", "-3ms", "0s", "0m0s", "0.0s", "0.01s",
		"300us", "300µs", "300μs", "2h45m0.5s", "60", "1", "", "s", "1d", "1 s", "1s ", "--1s", "1e3s", "0x10s", "1S", "00s", "10m0s", "-0s", "-0", "+0"} {
		d, err := time.ParseDuration(s)
		if got, want := anyD.MatchString(s), err == nil; got != want {
			t.Errorf("DurationPattern on %q: %v, time.ParseDuration: %v", s, got, err)
		}
		if got, want := positive.MatchString(s), err == nil && d > 0; got != want {
			t.Errorf("PositiveDurationPattern on %q: %v, want %v (time.ParseDuration: %v, %v)", s, got, want, d, err)
		}
		// No minus sign at all, not even on a zero.
		if got, want := nonNegative.MatchString(s), err == nil && d >= 0 && !strings.HasPrefix(s, "-"); got != want {
			t.Errorf("NonNegativeDurationPattern on %q: %v, want %v (time.ParseDuration: %v, %v)", s, got, want, d, err)
		}
	}
}

// Each typed value refuses what its schema refuses, and parses the rest.
func TestTypedValues(t *testing.T) {
	var (
		e, r  string
		i     int
		f     float64
		d, nn time.Duration
	)
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.Usage = func() {}
	EnumVar(fs, &e, "enum", "a", "an enum", "a", "b")
	IntVar(fs, &i, "int", 10, 1, "at least 1")
	PositiveFloatVar(fs, &f, "float", 20, "above 0")
	PositiveDurationVar(fs, &d, "dur", time.Minute, "above 0")
	NonNegativeDurationVar(fs, &nn, "nn", time.Second, "0 or more")
	RequiredStringVar(fs, &r, "req", "", "not empty")
	if e != "a" || i != 10 || f != 20 || d != time.Minute || nn != time.Second || r != "" {
		t.Fatalf("defaults: %q %d %v %v %v %q", e, i, f, d, nn, r)
	}
	for _, bad := range [][]string{{"--enum=c"}, {"--int=0"}, {"--int=x"}, {"--float=0"}, {"--float=-1"}, {"--float=1e3"},
		{"--float=Inf"}, {"--float=NaN"}, {"--dur=0s"}, {"--dur=-1s"}, {"--dur=60"}, {"--nn=-1s"}, {"--nn=-0s"}, {"--nn=1"}, {"--req="}} {
		if err := fs.Parse(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if err := fs.Parse([]string{"--enum=b", "--int=1", "--float=0.5", "--dur=1ms", "--nn=0", "--req=x"}); err != nil {
		t.Fatal(err)
	}
	if e != "b" || i != 1 || f != 0.5 || d != time.Millisecond || nn != 0 || r != "x" {
		t.Errorf("parsed: %q %d %v %v %v %q", e, i, f, d, nn, r)
	}
	// The help names each flag with its type.
	help := fs.FlagUsages()
	for _, want := range []string{"--enum string", "--int int", "--float float", "--dur duration"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
}

// Properties types every flag, standard and typed, nullable, with its usage;
// an unknown value type is an error that says what to add.
func TestProperties(t *testing.T) {
	var (
		s, e    string
		b       bool
		i, im   int
		u       uint
		f, fp   float64
		dur, dp time.Duration
	)
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.StringVar(&s, "s", "", "a string")
	fs.BoolVar(&b, "b", false, "a bool")
	fs.IntVar(&i, "i", 0, "an int")
	fs.UintVar(&u, "u", 0, "a uint")
	fs.Float64Var(&f, "f", 0, "a float")
	fs.DurationVar(&dur, "d", 0, "a duration")
	EnumVar(fs, &e, "e", "x", "an enum", "x", "y")
	IntVar(fs, &im, "im", 3, 2, "an int from 2")
	PositiveFloatVar(fs, &fp, "fp", 1, "a positive float")
	PositiveDurationVar(fs, &dp, "dp", time.Second, "a positive duration")
	fs.Bool("version", false, "skipped")
	got, err := Properties(fs, "version")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{
		"s": {"type": []any{"string", "null"}, "description": "a string"},
		"b": {"type": []any{"boolean", "null"}, "description": "a bool"},
		"i": {"type": []any{"integer", "null"}, "description": "an int"},
		"u": {"type": []any{"integer", "null"}, "minimum": 0, "description": "a uint"},
		"f": {"anyOf": append(Number(false)["anyOf"].([]any), map[string]any{"type": "null"}), "description": "a float"},
		"d": {"anyOf": []any{map[string]any{"type": "string", "pattern": DurationPattern}, map[string]any{"type": "number", "const": 0},
			map[string]any{"type": "null"}}, "description": "a duration"},
		"e":  {"type": []any{"string", "null"}, "enum": []any{"x", "y", nil}, "description": "an enum"},
		"im": {"type": []any{"integer", "null"}, "minimum": 2, "description": "an int from 2"},
		"fp": {"anyOf": append(Number(true)["anyOf"].([]any), map[string]any{"type": "null"}), "description": "a positive float"},
		"dp": {"type": []any{"string", "null"}, "pattern": PositiveDurationPattern, "description": "a positive duration"},
	}
	if len(got) != len(want) {
		t.Errorf("got %d flags, want %d: %v", len(got), len(want), got)
	}
	for name, w := range want {
		if !reflect.DeepEqual(got[name], w) {
			t.Errorf("%s: %#v, want %#v", name, got[name], w)
		}
	}

	fs.Var(unknownValue{}, "mystery", "what is it")
	if _, err := Properties(fs); err == nil || !strings.Contains(err.Error(), "--mystery") || !strings.Contains(err.Error(), "Allowed() []string") {
		t.Errorf("an unknown value type: %v", err)
	}
}

type unknownValue struct{}

func (unknownValue) String() string   { return "" }
func (unknownValue) Set(string) error { return nil }

// Type says "string", as any value may: Of goes by its Go type, not this.
func (unknownValue) Type() string { return "string" }
