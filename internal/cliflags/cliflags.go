// Package cliflags parses a binary's command line as Kubernetes components
// do, with pflag: --flag=value and --flag value alike, -v as klog's
// shorthand, an error for any argument that is not a flag (Go's flag
// package stops at the first one and ignores the rest), --help on stdout,
// and a short error, not the whole usage, on a mistake.
package cliflags

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/probed-dev/probed/internal/logflags"
)

// NewFlagSet is a daemon's command line: component-base's logging flags
// (internal/logflags), the flags add registers, and --version. It returns
// the logging configuration the flags fill and --version's value.
func NewFlagSet(name string, add func(*pflag.FlagSet)) (*pflag.FlagSet, *logsapi.LoggingConfiguration, *bool) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	logging := logflags.Add(fs)
	add(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	return fs, logging, showVersion
}

// Usage is --help: header, then "Flags:" and fs's flags.
func Usage(fs *pflag.FlagSet, header string) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintf(w, "%s\nFlags:\n%s", header, fs.FlagUsages())
	}
}

// ErrHelp is what Parse returns for --help and -h.
var ErrHelp = pflag.ErrHelp

// Parse parses args into fs and refuses anything left over: a daemon
// takes flags only. It returns ErrHelp for --help or -h; fs prints
// nothing itself (see Exit).
func Parse(fs *pflag.FlagSet, args []string) error {
	if err := ParseWithArgs(fs, args); err != nil {
		return err
	}
	if rest := fs.Args(); len(rest) > 0 {
		return leftover(fs, args, rest[0])
	}
	return nil
}

// ParseWithArgs is Parse for a command that takes arguments after its
// flags: they stay in fs.Args().
func ParseWithArgs(fs *pflag.FlagSet, args []string) error {
	// fs's own usage output would go to stderr, whole: Exit prints help
	// on stdout, and only the error on a mistake.
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	return fs.Parse(args)
}

// leftover says why arg is refused; most often it is the value of a
// boolean flag written apart from it, which pflag (as Kubernetes
// components) reads only after "=".
func leftover(fs *pflag.FlagSet, args []string, arg string) error {
	i := slices.Index(args, arg)
	if i > 0 && strings.HasPrefix(args[i-1], "--") && !strings.Contains(args[i-1], "=") {
		if f := fs.Lookup(strings.TrimPrefix(args[i-1], "--")); f != nil && f.Value.Type() == "bool" {
			return fmt.Errorf("unexpected argument %q: a boolean flag takes its value after \"=\": %s=%s", arg, args[i-1], arg)
		}
	}
	return fmt.Errorf("unexpected argument %q: %s takes flags only", arg, fs.Name())
}

// Exit reports the outcome of Parse and returns the exit code: 0 with
// usage on stdout for ErrHelp, else 2 with the error and where to find
// usage on stderr.
func Exit(err error, fs *pflag.FlagSet, usage func(io.Writer), stdout, stderr io.Writer) int {
	if errors.Is(err, ErrHelp) {
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "error: %v\nRun '%s --help' for usage.\n", err, fs.Name())
	return 2
}
