// Package flagschema gives command-line flags values that say what they
// accept, and turns a binary's whole flag set into JSON Schema. The Helm
// chart's values.schema.json types each flag from it, so the schema follows
// the flags the binary really defines, with their enums, ranges and
// durations, instead of a list kept by hand.
package flagschema

import (
	"fmt"
	"regexp"
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

// positiveFloat is a float64 flag that must be above zero, spelled as
// PositiveNumberPattern has it.
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

var positiveNumber = regexp.MustCompile(PositiveNumberPattern)

func (v *positiveFloat) Set(s string) error {
	if !positiveNumber.MatchString(s) {
		return fmt.Errorf("%q: want a decimal number above 0, such as 2.5", s)
	}
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

// durationValue is a time.Duration flag whose text must match pattern (the
// one its schema publishes) and whose value must be at least min.
type durationValue struct {
	p       *time.Duration
	pattern *regexp.Regexp
	min     time.Duration
	what    string
}

// PositiveDurationVar defines a duration flag that refuses zero and below.
func PositiveDurationVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(&durationValue{p: p, pattern: positiveDuration, min: 1, what: "above 0"}, name, usage)
}

// NonNegativeDurationVar defines a duration flag that refuses values below
// zero; zero (written 0 or 0s) is allowed.
func NonNegativeDurationVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(&durationValue{p: p, pattern: nonNegativeDuration, min: 0, what: "0 or more"}, name, usage)
}

var (
	positiveDuration    = regexp.MustCompile(PositiveDurationPattern)
	nonNegativeDuration = regexp.MustCompile(NonNegativeDurationPattern)
)

func (v *durationValue) String() string {
	if v == nil || v.p == nil {
		return "0s"
	}
	return v.p.String()
}

func (v *durationValue) Set(s string) error {
	if v.pattern != nil && !v.pattern.MatchString(s) {
		if _, err := time.ParseDuration(s); err != nil {
			return err
		}
		return fmt.Errorf("%q: must be %s", s, v.what)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < v.min {
		return fmt.Errorf("%q: must be %s", s, v.what)
	}
	*v.p = d
	return nil
}

// Type names the value in pflag's help.
func (v *durationValue) Type() string { return "duration" }

// JSONSchema implements Describer.
func (v *durationValue) JSONSchema() map[string]any {
	return Duration(v.pattern.String())
}

// requiredString is a string flag that refuses the empty string.
type requiredString struct{ p *string }

// RequiredStringVar defines a string flag that refuses "" when set (its
// default may still be empty: say so where the value is checked).
func RequiredStringVar(fs *pflag.FlagSet, p *string, name string, value string, usage string) {
	*p = value
	fs.Var(&requiredString{p: p}, name, usage)
}

func (v *requiredString) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}

func (v *requiredString) Set(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	*v.p = s
	return nil
}

// Type names the value in pflag's help.
func (v *requiredString) Type() string { return "string" }

// JSONSchema implements Describer.
func (v *requiredString) JSONSchema() map[string]any {
	return map[string]any{"type": "string", "minLength": 1}
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

// patternString is a string flag whose value must match the pattern its
// schema publishes; the empty string is allowed where the pattern allows it.
type patternString struct {
	p       *string
	pattern *regexp.Regexp
	what    string
}

// PatternStringVar defines a string flag that refuses a value not matching
// pattern (a JSON Schema pattern, so also Go regexp syntax), saying it must
// be what.
func PatternStringVar(fs *pflag.FlagSet, p *string, name, value, pattern, what, usage string) {
	*p = value
	fs.Var(&patternString{p: p, pattern: regexp.MustCompile(pattern), what: what}, name, usage)
}

func (v *patternString) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}

func (v *patternString) Set(s string) error {
	if !v.pattern.MatchString(s) {
		return fmt.Errorf("%q: must be %s", s, v.what)
	}
	*v.p = s
	return nil
}

// Type names the value in pflag's help.
func (v *patternString) Type() string { return "string" }

// JSONSchema implements Describer.
func (v *patternString) JSONSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": v.pattern.String()}
}
