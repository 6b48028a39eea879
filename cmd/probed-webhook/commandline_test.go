package main

import (
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/internal/cliflags"
	"github.com/probed-dev/probed/internal/selfexec"
)

func TestMain(m *testing.M) { selfexec.Main(m, main) }

// The webhook's command line parses as probed's and Kubernetes components'
// do (see cmd/probed's TestCommandLine).
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		check   func(o *options, v uint32) bool
		wantErr string
	}{
		{name: "values apart and after =",
			args: []string{"--namespace", "probed-system", "--manage-certs=false", "--cert-dir", "/tls", "--gate-grace", "5m", "-v", "3"},
			check: func(o *options, v uint32) bool {
				return o.Namespace == "probed-system" && !o.ManageCerts && o.CertDir == "/tls" && o.GateGrace == 5*time.Minute && v == 3
			}},
		{name: "a boolean's value apart from it", args: []string{"--namespace=n", "--manage-certs", "false", "--cert-dir=/tls"},
			wantErr: `unexpected argument "false": a boolean flag takes its value after "=": --manage-certs=false`},
		{name: "a stray argument", args: []string{"--namespace=n", "probed-system"}, wantErr: `unexpected argument "probed-system": probed-webhook takes flags only`},
		{name: "an unknown flag", args: []string{"--foo=1"}, wantErr: "unknown flag: --foo"},
		{name: "a single-dash long flag", args: []string{"-namespace=n"}, wantErr: "unknown shorthand flag: 'n' in -namespace=n"},
		{name: "--v=2", args: []string{"--v=2"}, check: func(_ *options, v uint32) bool { return v == 2 }},
		{name: "--help", args: []string{"--help"}, wantErr: cliflags.ErrHelp.Error()},
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
			case tc.check != nil && !tc.check(o, uint32(logging.Verbosity)):
				t.Errorf("%q parsed into %+v, verbosity %d", tc.args, o, logging.Verbosity)
			}
		})
	}
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
