package main

import (
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/internal/cliflags"
	"github.com/probed-dev/probed/internal/cliflags/cliflagstest"
	"github.com/probed-dev/probed/internal/selfexec"
)

func TestMain(m *testing.M) { selfexec.Main(m, main) }

// The webhook's command line parses as probed's and Kubernetes components'
// do (see cmd/probed's TestCommandLine).
func TestCommandLine(t *testing.T) {
	type parsed = cliflagstest.Parsed[options]
	type c = cliflagstest.Case[parsed]
	cliflagstest.Run(t, cliflagstest.Parser(newFlagSet), []c{
		{Name: "values apart and after =",
			Args: []string{"--namespace", "probed-system", "--manage-certs=false", "--cert-dir", "/tls", "--gate-grace", "5m", "-v", "3"},
			Check: func(p parsed) bool {
				return p.Opts.Namespace == "probed-system" && !p.Opts.ManageCerts && p.Opts.CertDir == "/tls" && p.Opts.GateGrace == 5*time.Minute && p.Verbosity == 3
			}},
		{Name: "a boolean's value apart from it", Args: []string{"--namespace=n", "--manage-certs", "false", "--cert-dir=/tls"},
			WantErr: `unexpected argument "false": a boolean flag takes its value after "=": --manage-certs=false`},
		{Name: "a stray argument", Args: []string{"--namespace=n", "probed-system"}, WantErr: `unexpected argument "probed-system": probed-webhook takes flags only`},
		{Name: "an unknown flag", Args: []string{"--foo=1"}, WantErr: "unknown flag: --foo"},
		{Name: "a single-dash long flag", Args: []string{"-namespace=n"}, WantErr: "unknown shorthand flag: 'n' in -namespace=n"},
		{Name: "--v=2", Args: []string{"--v=2"}, Check: func(p parsed) bool { return p.Verbosity == 2 }},
		{Name: "--help", Args: []string{"--help"}, WantErr: cliflags.ErrHelp.Error()},
	})
}

// --help is the usage on stdout, exit 0; a bad flag is a short error on
// stderr, exit 2.
func TestHelpAndErrors(t *testing.T) {
	out, errOut, code := selfexec.Run(t, "--help")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "Usage: probed-webhook [flags]") || !strings.Contains(out, "--manage-certs") {
		t.Errorf("--help: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	out, errOut, code = selfexec.Run(t, "--foo")
	if want := "error: unknown flag: --foo\nRun 'probed-webhook --help' for usage.\n"; code != 2 || out != "" || errOut != want {
		t.Errorf("--foo: exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errOut, want)
	}
}
