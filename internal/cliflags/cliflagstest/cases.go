// Package cliflagstest checks how a command parses argument vectors.
package cliflagstest

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/probed-dev/probed/internal/cliflags"
)

// Parsed is what a command line gave: the options and -v.
type Parsed[O any] struct {
	Opts      *O
	Verbosity uint32
}

// Parser parses a command line as the command does: a flag set from
// newFlagSet (cliflags.NewFlagSet's shape), parsed with cliflags.Parse.
func Parser[O any](newFlagSet func(*O) (*pflag.FlagSet, *logsapi.LoggingConfiguration, *bool)) func([]string) (Parsed[O], error) {
	return func(args []string) (Parsed[O], error) {
		o := new(O)
		fs, logging, _ := newFlagSet(o)
		err := cliflags.Parse(fs, args)
		return Parsed[O]{o, uint32(logging.Verbosity)}, err
	}
}

// Case is one argument vector and what parsing it must give: an error
// containing WantErr, or (WantErr "") a result Check accepts.
type Case[T any] struct {
	Name    string
	Args    []string
	Check   func(T) bool
	WantErr string
}

// Run parses each case's arguments with parse and checks the outcome.
func Run[T any](t *testing.T, parse func(args []string) (T, error), cases []Case[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := parse(tc.Args)
			switch {
			case tc.WantErr == "" && err != nil:
				t.Fatalf("%q: %v", tc.Args, err)
			case tc.WantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.WantErr)):
				t.Fatalf("%q: error %v, want %q; parsed %+v", tc.Args, err, tc.WantErr, got)
			case tc.WantErr == "" && tc.Check != nil && !tc.Check(got):
				t.Errorf("%q parsed into %+v", tc.Args, got)
			}
		})
	}
}
