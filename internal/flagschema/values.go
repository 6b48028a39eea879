// Package flagschema gives command-line flags values that say what they
// accept, and turns a binary's whole flag set into JSON Schema. The Helm
// chart's values.schema.json types each flag from it, so the schema follows
// the flags the binary really defines, with their enums, ranges and
// durations, instead of a list kept by hand.
package flagschema

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// Describer is a flag value that describes what it accepts as a JSON
// Schema (without "null", which Properties adds).
type Describer interface {
	JSONSchema() map[string]any
}

// Enum is a flag value that accepts one of a fixed set of spellings.
type Enum interface {
	Allowed() []string
}

// enumValue is a string flag, of any string type, that refuses anything
// not in allowed: parsed once, so the code after it compares typed
// constants, never flag strings.
type enumValue[T ~string] struct {
	p       *T
	allowed []T
}

// EnumVar defines a string flag that must be one of allowed.
func EnumVar[T ~string](fs *pflag.FlagSet, p *T, name string, value T, usage string, allowed ...T) {
	*p = value
	fs.Var(&enumValue[T]{p: p, allowed: allowed}, name, usage)
}

func (v *enumValue[T]) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return string(*v.p)
}

func (v *enumValue[T]) Set(s string) error {
	if !slices.Contains(v.allowed, T(s)) {
		return fmt.Errorf("must be one of %q", v.allowed)
	}
	*v.p = T(s)
	return nil
}

// Type implements pflag.Value.
func (v *enumValue[T]) Type() string { return "string" }

// Allowed implements Enum.
func (v *enumValue[T]) Allowed() []string {
	out := make([]string, len(v.allowed))
	for i, a := range v.allowed {
		out[i] = string(a)
	}
	return out
}

// intValue is an int flag with a lower bound.
type intValue struct {
	p   *int
	min int
}

// IntVar defines an int flag that refuses values below min.
func IntVar(fs *pflag.FlagSet, p *int, name string, value, min int, usage string) {
	*p = value
	fs.Var(&intValue{p: p, min: min}, name, usage)
}

func (v *intValue) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v *intValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return fmt.Errorf("not a whole number: %w", err)
	}
	if int(n) < v.min {
		return fmt.Errorf("must be at least %d", v.min)
	}
	*v.p = int(n)
	return nil
}

// Type implements pflag.Value.
func (v *intValue) Type() string { return "int" }

// JSONSchema implements Describer.
func (v *intValue) JSONSchema() map[string]any {
	return map[string]any{"type": "integer", "minimum": v.min}
}

// positiveFloat is a float64 flag that must be above zero.
type positiveFloat struct{ p *float64 }

// PositiveFloatVar defines a float64 flag that refuses zero and below.
func PositiveFloatVar(fs *pflag.FlagSet, p *float64, name string, value float64, usage string) {
	*p = value
	fs.Var(&positiveFloat{p: p}, name, usage)
}

func (v *positiveFloat) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

func (v *positiveFloat) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("not a number: %w", err)
	}
	if !(f > 0) {
		return fmt.Errorf("must be above 0")
	}
	*v.p = f
	return nil
}

// Type implements pflag.Value.
func (v *positiveFloat) Type() string { return "float64" }

// JSONSchema implements Describer.
func (v *positiveFloat) JSONSchema() map[string]any {
	return Number(true)
}

// positiveDuration is a time.Duration flag that must be above zero.
type positiveDuration struct{ p *time.Duration }

// PositiveDurationVar defines a duration flag that refuses zero and below.
func PositiveDurationVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(&positiveDuration{p: p}, name, usage)
}

func (v *positiveDuration) String() string {
	if v == nil || v.p == nil {
		return "0s"
	}
	return v.p.String()
}

func (v *positiveDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("must be above 0")
	}
	*v.p = d
	return nil
}

// Type implements pflag.Value.
func (v *positiveDuration) Type() string { return "duration" }

// JSONSchema implements Describer.
func (v *positiveDuration) JSONSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": PositiveDurationPattern}
}

// Described gives a flag value from elsewhere (component-base's, say) a
// schema of its own.
type Described struct {
	pflag.Value
	Schema map[string]any
}

// JSONSchema implements Describer.
func (d Described) JSONSchema() map[string]any { return d.Schema }

// String is safe on the zero value.
func (d Described) String() string {
	if d.Value == nil {
		return ""
	}
	return d.Value.String()
}
