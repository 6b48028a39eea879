package main

import (
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/internal/cliflags"
	"github.com/probed-dev/probed/internal/selfexec"
	"github.com/probed-dev/probed/pkg/probespec"
)

// The daemon's command line parses as Kubernetes components' do: a value
// after "=" or as the next argument, -v as klog's shorthand, and an error,
// never a silent misparse, for anything else.
func TestCommandLine(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	type parsed struct {
		o         *options
		verbosity uint32
	}
	for _, tc := range []struct {
		name    string
		args    []string
		check   func(p parsed) bool
		wantErr string // "" parses
	}{
		{name: "the issue's command line: a boolean's value apart from it",
			args:    []string{"--liveness-action", "event-only", "--dry-run", "false", "--probe-source=spec"},
			wantErr: `unexpected argument "false": a boolean flag takes its value after "=": --dry-run=false`},
		{name: "the same, as it must be written",
			args: []string{"--liveness-action", "event-only", "--dry-run=false", "--probe-source=spec"},
			check: func(p parsed) bool {
				return p.o.LivenessAction == livenessEventOnly && !p.o.DryRun && p.o.ProbeSource == probespec.ProbeSourceSpec
			}},
		{name: "values as the next argument",
			args: []string{"--node-name", "node-a", "--dry-run", "--probe-source", "both", "--status-resync", "30s", "--kube-api-qps", "5"},
			check: func(p parsed) bool {
				return p.o.NodeName == "node-a" && p.o.DryRun && p.o.ProbeSource == probespec.ProbeSourceBoth &&
					p.o.StatusResync == 30*time.Second && p.o.KubeAPIQPS == 5
			}},
		{name: "a boolean set false", args: []string{"--metrics-pod-uid-label=false"},
			check: func(p parsed) bool { return !p.o.MetricsPodUIDLabel }},
		{name: "-v=4", args: []string{"-v=4"}, check: func(p parsed) bool { return p.verbosity == 4 }},
		{name: "-v 4", args: []string{"-v", "4"}, check: func(p parsed) bool { return p.verbosity == 4 }},
		{name: "--v=4", args: []string{"--v=4"}, check: func(p parsed) bool { return p.verbosity == 4 }},
		{name: "a stray argument", args: []string{"--node-name=node-a", "extra"}, wantErr: `unexpected argument "extra": probed takes flags only`},
		{name: "a stray argument after a string flag's value", args: []string{"--node-name", "node-a", "false"}, wantErr: `unexpected argument "false": probed takes flags only`},
		{name: "an unknown flag", args: []string{"--foo"}, wantErr: "unknown flag: --foo"},
		{name: "a single-dash long flag", args: []string{"-node-name=node-a"}, wantErr: "unknown shorthand flag: 'n' in -node-name=node-a"},
		{name: "a bad enum as the next argument", args: []string{"--status-mode", "bogus"}, wantErr: `invalid argument "bogus" for "--status-mode" flag`},
		{name: "a value missing", args: []string{"--node-name"}, wantErr: "flag needs an argument: --node-name"},
		{name: "--help", args: []string{"--help"}, wantErr: cliflags.ErrHelp.Error()},
		{name: "-h", args: []string{"-h"}, wantErr: cliflags.ErrHelp.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &options{}
			fs, logging, _ := newFlagSet(o)
			err := cliflags.Parse(fs, tc.args)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("%q: %v", tc.args, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("%q: error %v, want %q; parsed %+v", tc.args, err, tc.wantErr, o)
			case tc.check != nil && !tc.check(parsed{o, uint32(logging.Verbosity)}):
				t.Errorf("%q parsed into %+v, verbosity %d", tc.args, o, logging.Verbosity)
			}
		})
	}
}

// --help is the usage, on stdout, exit 0; a mistake is one short error on
// stderr, exit 2, not the usage.
func TestHelpAndErrors(t *testing.T) {
	run := func(args ...string) (string, string, int) { return selfexec.Run(t, args...) }
	for _, help := range []string{"--help", "-h"} {
		out, errOut, code := run(help)
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: probed [flags]") ||
			!strings.Contains(out, "--node-name string") || !strings.Contains(out, "-v, --v Level") {
			t.Errorf("%s: exit %d, stderr %q, stdout:\n%s", help, code, errOut, out)
		}
	}
	for args, want := range map[string]string{
		"--foo": "error: unknown flag: --foo\nRun 'probed --help' for usage.\n",
		"--liveness-action event-only --dry-run false --probe-source=spec": `error: unexpected argument "false": a boolean flag takes its value after "=": --dry-run=false` +
			"\nRun 'probed --help' for usage.\n",
	} {
		out, errOut, code := run(strings.Fields(args)...)
		if code != 2 || out != "" || errOut != want {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and %q", args, code, out, errOut, want)
		}
	}
}
