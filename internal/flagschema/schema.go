package flagschema

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"

	"github.com/spf13/pflag"
)

// Go duration syntax (time.ParseDuration), as a JSON Schema pattern: a
// sign, then one or more number-unit pairs, or a bare 0.
const (
	durationUnit = `(ns|us|µs|μs|ms|s|m|h)`
	durationNum  = `([0-9]+(\.[0-9]*)?|\.[0-9]+)`
	// DurationPattern is any duration.
	DurationPattern = `^[-+]?(0|(` + durationNum + durationUnit + `)+)$`
	// NonNegativeDurationPattern is a duration of zero or more: no minus sign.
	NonNegativeDurationPattern = `^\+?(0|(` + durationNum + durationUnit + `)+)$`
	// PositiveDurationPattern is a duration above zero: no minus sign, and
	// a digit other than 0 somewhere.
	PositiveDurationPattern = `^\+?(` + durationNum + durationUnit + `)*` +
		`([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)` + durationUnit +
		`(` + durationNum + durationUnit + `)*$`
)

// Duration is the schema of a duration flag whose text matches pattern. A
// duration that may be zero also takes the number 0: Helm's --set makes a
// number of "0", and probed reads the 0 it renders as no time at all.
func Duration(pattern string) map[string]any {
	s := map[string]any{"type": "string", "pattern": pattern}
	if !regexp.MustCompile(pattern).MatchString("0") {
		return s
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "number", "const": 0}}}
}

// Properties describes every flag of fs, but those named in skip, as the
// JSON Schema of a value that sets it: a map from flag name to schema. Each
// also accepts null (the chart's "leave probed's default"); descriptions
// are the flags' usage. A flag whose value type it does not know is an
// error: give that value a JSONSchema method (Describer) or an Allowed
// method (Enum).
func Properties(fs *pflag.FlagSet, skip ...string) (map[string]any, error) {
	props := map[string]any{}
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if slices.Contains(skip, f.Name) {
			return
		}
		s, err := Of(f.Value)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", f.Name, err))
			return
		}
		s = Nullable(s)
		s["description"] = f.Usage
		props[f.Name] = s
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("%v", errs)
	}
	return props, nil
}

// Of is the JSON Schema of what v accepts: its own (Describer, Enum), or
// that of the standard library's flag types.
func Of(v pflag.Value) (map[string]any, error) {
	if d, ok := v.(Describer); ok {
		return clone(d.JSONSchema()), nil
	}
	if e, ok := v.(Enum); ok {
		return map[string]any{"type": "string", "enum": e.Allowed()}, nil
	}
	// pflag's own values are unexported: know them by type, not by what
	// their Type method says, which any value may claim.
	switch t := reflect.TypeOf(v).String(); t {
	case "*pflag.boolValue":
		return map[string]any{"type": "boolean"}, nil
	case "*pflag.intValue", "*pflag.int64Value":
		return map[string]any{"type": "integer"}, nil
	case "*pflag.uintValue", "*pflag.uint64Value":
		return map[string]any{"type": "integer", "minimum": 0}, nil
	case "*pflag.float64Value":
		return Number(false), nil
	case "*pflag.durationValue":
		return Duration(DurationPattern), nil
	case "*pflag.stringValue":
		return map[string]any{"type": "string"}, nil
	default:
		return nil, fmt.Errorf("value type %s is unknown to flagschema: give it a JSONSchema() map[string]any method, or Allowed() []string for an enum", t)
	}
}

// The spellings of a decimal number a float flag's value accepts, as JSON
// Schema patterns; no exponent, no Inf or NaN.
const (
	NumberPattern         = `^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$`
	PositiveNumberPattern = `^\+?([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)$`
)

// Number is a float flag's schema: a number, or a string that spells one
// (helm --set passes 2.5 as the string "2.5"); positive: above zero.
func Number(positive bool) map[string]any {
	if positive {
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "number", "exclusiveMinimum": 0},
			map[string]any{"type": "string", "pattern": PositiveNumberPattern},
		}}
	}
	return map[string]any{"anyOf": []any{
		map[string]any{"type": "number"},
		map[string]any{"type": "string", "pattern": NumberPattern},
	}}
}

// Nullable returns s that also accepts null.
func Nullable(s map[string]any) map[string]any {
	s = clone(s)
	if a, ok := s["anyOf"].([]any); ok {
		s["anyOf"] = append(slices.Clone(a), map[string]any{"type": "null"})
	}
	switch t := s["type"].(type) {
	case string:
		s["type"] = []any{t, "null"}
	case []any:
		if !slices.Contains(t, any("null")) {
			s["type"] = append(slices.Clone(t), "null")
		}
	}
	if e, ok := s["enum"].([]string); ok {
		all := make([]any, 0, len(e)+1)
		for _, x := range e {
			all = append(all, x)
		}
		s["enum"] = append(all, nil)
	}
	return s
}

func clone(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
