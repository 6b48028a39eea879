package main

import (
	"flag"
	"fmt"
	"slices"
)

// enumFlag is a flag whose value is one of a fixed set, parsed once into
// the typed value it points at: an unknown value fails the parse, and the
// code after it compares typed constants, never flag strings.
type enumFlag[T ~string] struct {
	p       *T
	allowed []T
}

// enumVar defines an enum flag with default def and the allowed values.
func enumVar[T ~string](fs *flag.FlagSet, p *T, name string, def T, usage string, allowed ...T) {
	*p = def
	fs.Var(enumFlag[T]{p, allowed}, name, usage)
}

func (f enumFlag[T]) String() string {
	if f.p == nil {
		return ""
	}
	return string(*f.p)
}

func (f enumFlag[T]) Set(s string) error {
	if !slices.Contains(f.allowed, T(s)) {
		return fmt.Errorf("must be one of %q", f.allowed)
	}
	*f.p = T(s)
	return nil
}

// Type names the value's type in pflag's help output.
func (f enumFlag[T]) Type() string { return "string" }
