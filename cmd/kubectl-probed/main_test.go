package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/internal/convertcli"
	"github.com/probed-dev/probed/pkg/version"
)

func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runWith(t, probedConvert, args...)
}

func runWith(t *testing.T, convert convertFunc, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, clocktesting.NewFakePassiveClock(time.Unix(0, 0)), convert)
	return code, out.String(), errOut.String()
}

func TestVersion(t *testing.T) {
	version.Version, version.Revision, version.BuildDate = "v0.2.0", "0123abc", "2026-11-25T00:00:00Z"
	t.Cleanup(func() { version.Version, version.Revision, version.BuildDate = "v0.0.0-dev", "unknown", "unknown" })
	code, out, _ := runArgs(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "kubectl-probed v0.2.0 (revision 0123abc, built 2026-11-25T00:00:00Z, go") {
		t.Errorf("--version: code %d, %q", code, out)
	}
}

// kubectl's own flags are there, as in every kubectl plugin.
func TestKubectlFlags(t *testing.T) {
	_, out, _ := runArgs(t, "status", "--help")
	for _, f := range []string{"--kubeconfig", "--context", "-n, --namespace", "--token", "--probed-namespace", "-o, --output"} {
		if !strings.Contains(out, f) {
			t.Errorf("status --help lacks %s", f)
		}
	}
	if !strings.Contains(out, "kubectl probed status [POD | TYPE/NAME...] [-l SELECTOR] [-A]") {
		t.Errorf("usage does not say kubectl probed:\n%s", out)
	}
}

// kubectl's conventions: -v is klog's verbosity (not --version), -o takes
// cli-runtime's formats, and --as is not offered, since probed refuses
// impersonation.
func TestKubectlConventions(t *testing.T) {
	_, out, _ := runArgs(t, "status", "--help")
	for _, want := range []string{"-v, --v Level", "-o, --output string", "json, yaml", "jsonpath", "go-template"} {
		if !strings.Contains(out, want) {
			t.Errorf("status --help lacks %q:\n%s", want, out)
		}
	}
	for _, refused := range []string{"--as ", "--as-group", "--as-uid", "--as-user-extra", "-v, --version"} {
		if strings.Contains(out, refused) {
			t.Errorf("status --help offers %q", refused)
		}
	}
	if code, out, errOut := runArgs(t, "-v=4", "--version"); code != 0 || !strings.HasPrefix(out, "kubectl-probed ") {
		t.Errorf("-v=4 --version: code %d, %q %q", code, out, errOut)
	}
	for _, as := range []string{"--as", "--as-user-extra"} {
		if code, _, errOut := runArgs(t, "status", "a", as, "someone"); code != 1 || !strings.Contains(errOut, "unknown flag: "+as) {
			t.Errorf("%s: code %d, %q", as, code, errOut)
		}
	}
	if code, _, errOut := runArgs(t, "top", "-o", "xml"); code != 1 || !strings.Contains(errOut, "allowed formats are: ") {
		t.Errorf("top -o xml: code %d, %q", code, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"status", "a", "-l", "app=web"}, {"status", "deploy/web", "-A"}, {"status", "a", "-o", "xml"}, {"status", "-o", "xml"}, {"top", "--interval", "0s"}, {"top", "--concurrency", "0"}, {"top", "--max-rows", "-1"}, {"nope"}} {
		if code, _, errOut := runArgs(t, args...); code != 1 || !strings.HasPrefix(errOut, "error: ") {
			t.Errorf("%q: code %d, stderr %q; want 1 and an error", args, code, errOut)
		}
	}
}

// convert hands every argument, flags included, to the convert command and
// exits with its code.
func TestConvertPassesArgs(t *testing.T) {
	var got []string
	convert := func(args []string, in io.Reader, out, errOut io.Writer) int {
		got = args
		return 1
	}
	code, _, _ := runWith(t, convert, "convert", "--check", "-v", "a.yaml", "--kubeconfig", "x")
	if code != 1 || strings.Join(got, " ") != "--check -v a.yaml --kubeconfig x" {
		t.Errorf("convert: code %d, args %q", code, got)
	}
}

// kubectl probed convert is probed convert: the same output for the same
// manifests.
func TestConvertIsProbedConvert(t *testing.T) {
	const in = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    image: x\n    readinessProbe:\n      exec:\n        command: [\"true\"]\n"
	var got, gotErr, want, wantErr strings.Builder
	code := probedConvert(nil, strings.NewReader(in), &got, &gotErr)
	wantCode := convertcli.Command{Name: "probed convert", Stdin: strings.NewReader(in), Stdout: &want, Stderr: &wantErr}.Run(nil)
	if code != 0 || wantCode != 0 || got.String() != want.String() {
		t.Fatalf("kubectl probed convert: %d %q %q; probed convert: %d %q", code, got.String(), gotErr.String(), wantCode, want.String())
	}
	if !strings.Contains(got.String(), "probed.io/probes") || !strings.Contains(got.String(), "probed.io/ready") {
		t.Errorf("not converted:\n%s", got.String())
	}
}

// status shows one pod's probe history when it names one pod and nothing
// else; anything else is the table of many.
func TestStatusOnePod(t *testing.T) {
	for _, tc := range []struct {
		args []string
		s    statusOptions
		want string // "" for the table
	}{
		{[]string{"web-1"}, statusOptions{}, "web-1"},
		{[]string{"pod/web-1"}, statusOptions{}, "web-1"},
		{[]string{"po/web-1"}, statusOptions{}, "web-1"},
		{[]string{"pods/web-1"}, statusOptions{}, "web-1"},
		{[]string{"deploy/web"}, statusOptions{}, ""},
		{[]string{"pod/"}, statusOptions{}, ""},
		{[]string{"web-1", "web-2"}, statusOptions{}, ""},
		{nil, statusOptions{}, ""},
		{nil, statusOptions{selector: "app=web"}, ""},
		{nil, statusOptions{allNamespaces: true}, ""},
	} {
		name, ok := onePod(tc.args, tc.s)
		if ok != (tc.want != "") || name != tc.want {
			t.Errorf("onePod(%q, %+v) = %q, %v; want %q", tc.args, tc.s, name, ok, tc.want)
		}
	}
}
