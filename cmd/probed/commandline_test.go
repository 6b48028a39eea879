package main

import (
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/internal/cliflags"
	"github.com/probed-dev/probed/internal/cliflags/cliflagstest"
	"github.com/probed-dev/probed/internal/selfexec"
	"github.com/probed-dev/probed/pkg/probespec"
)

// The daemon's command line parses as Kubernetes components' do: a value
// after "=" or as the next argument, -v as klog's shorthand, and an error,
// never a silent misparse, for anything else.
func TestCommandLine(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	type parsed = cliflagstest.Parsed[options]
	type c = cliflagstest.Case[parsed]
	cliflagstest.Run(t, cliflagstest.Parser(newFlagSet), []c{
		{Name: "the issue's command line: a boolean's value apart from it",
			Args:    []string{"--liveness-action", "event-only", "--dry-run", "false", "--probe-source=spec"},
			WantErr: `unexpected argument "false": a boolean flag takes its value after "=": --dry-run=false`},
		{Name: "the same, as it must be written",
			Args: []string{"--liveness-action", "event-only", "--dry-run=false", "--probe-source=spec"},
			Check: func(p parsed) bool {
				return p.Opts.LivenessAction == livenessEventOnly && !p.Opts.DryRun && p.Opts.ProbeSource == probespec.ProbeSourceSpec
			}},
		{Name: "values as the next argument",
			Args: []string{"--node-name", "node-a", "--dry-run", "--probe-source", "both", "--status-resync", "30s", "--kube-api-qps", "5"},
			Check: func(p parsed) bool {
				return p.Opts.NodeName == "node-a" && p.Opts.DryRun && p.Opts.ProbeSource == probespec.ProbeSourceBoth &&
					p.Opts.StatusResync == 30*time.Second && p.Opts.KubeAPIQPS == 5
			}},
		{Name: "a boolean set false", Args: []string{"--metrics-pod-uid-label=false"},
			Check: func(p parsed) bool { return !p.Opts.MetricsPodUIDLabel }},
		{Name: "-v=4", Args: []string{"-v=4"}, Check: func(p parsed) bool { return p.Verbosity == 4 }},
		{Name: "-v 4", Args: []string{"-v", "4"}, Check: func(p parsed) bool { return p.Verbosity == 4 }},
		{Name: "--v=4", Args: []string{"--v=4"}, Check: func(p parsed) bool { return p.Verbosity == 4 }},
		{Name: "a stray argument", Args: []string{"--node-name=node-a", "extra"}, WantErr: `unexpected argument "extra": probed takes flags only`},
		{Name: "a stray argument after a string flag's value", Args: []string{"--node-name", "node-a", "false"}, WantErr: `unexpected argument "false": probed takes flags only`},
		{Name: "an unknown flag", Args: []string{"--foo"}, WantErr: "unknown flag: --foo"},
		{Name: "a single-dash long flag", Args: []string{"-node-name=node-a"}, WantErr: "unknown shorthand flag: 'n' in -node-name=node-a"},
		{Name: "a bad enum as the next argument", Args: []string{"--status-mode", "bogus"}, WantErr: `invalid argument "bogus" for "--status-mode" flag`},
		{Name: "a value missing", Args: []string{"--node-name"}, WantErr: "flag needs an argument: --node-name"},
		{Name: "--help", Args: []string{"--help"}, WantErr: cliflags.ErrHelp.Error()},
		{Name: "-h", Args: []string{"-h"}, WantErr: cliflags.ErrHelp.Error()},
	})
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
