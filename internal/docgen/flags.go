package docgen

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/probed-dev/probed/internal/flagschema"
)

// FlagTable is a Markdown table of fs's flags, sorted by name: each flag's
// spelling, what it takes (its type; an enum's values, an integer's least
// value, from internal/flagschema), its default and its usage string.
// Hidden flags are left out. Defaults are what fs holds, so build fs with
// the environment the defaults read (NODE_NAME, ...) unset.
func FlagTable(fs *pflag.FlagSet) string {
	var b strings.Builder
	b.WriteString("| flag | takes | default | description |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name := Code("--" + f.Name)
		if f.Shorthand != "" {
			name = Code("-"+f.Shorthand) + ", " + name
		}
		usage := f.Usage
		if f.Deprecated != "" {
			usage = "deprecated: " + f.Deprecated
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, takes(f.Value), defaultCell(f), Cell(usage))
	})
	return b.String()
}

// takes says what a flag's value may be.
func takes(v pflag.Value) string {
	if e, ok := v.(flagschema.Enum); ok {
		vals := e.Allowed()
		for i, a := range vals {
			vals[i] = Code(a)
		}
		return strings.Join(vals, ", ")
	}
	t := v.Type()
	switch t {
	case "float64", "float32":
		t = "number"
	case "stringSlice", "stringArray":
		t = "strings"
	case "Level": // klog's -v
		t = "int"
	}
	if d, ok := v.(flagschema.Describer); ok {
		if bound := lowerBound(d.JSONSchema()); bound != "" {
			return t + " " + bound
		}
	}
	return t
}

// lowerBound is "≥ n" or "> n" from a schema's minimum or exclusive
// minimum, its own or that of one of its anyOf choices; "" if none.
func lowerBound(s map[string]any) string {
	if m, ok := s["minimum"]; ok {
		return fmt.Sprintf("≥ %v", m)
	}
	if m, ok := s["exclusiveMinimum"]; ok {
		return fmt.Sprintf("> %v", m)
	}
	if choices, ok := s["anyOf"].([]any); ok {
		for _, c := range choices {
			if cs, ok := c.(map[string]any); ok {
				if b := lowerBound(cs); b != "" {
					return b
				}
			}
		}
	}
	return ""
}

// defaultCell is a flag's default as code, or nothing for an empty one.
func defaultCell(f *pflag.Flag) string {
	if f.DefValue == "" || f.DefValue == "[]" {
		return ""
	}
	return Code(f.DefValue)
}
