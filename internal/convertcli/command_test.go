package convertcli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCommand(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Command{Name: "probed convert", Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb}.Run(args)
	return code, out.String(), errb.String()
}

// readTestdata reads one of pkg/convert's golden files.
func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "pkg", "convert", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// skippedLines are comments.in.yaml's objects without a pod template, as
// stderr names them.
const skippedLines = "stdin: document 1 (line 3), ConfigMap shop/web-config: skipped: no pod template (looked at spec.template, spec.jobTemplate.spec.template, template)\n" +
	"stdin: document 3 (line 54), Service web: skipped: no pod template (looked at spec.template, spec.jobTemplate.spec.template, template)\n"

// stdin to stdout; --check exits 1 while something would change and 0 on
// converted manifests, and writes nothing to stdout. Every object without
// a pod template is named on stderr, and every template left alone.
func TestCommandStdinAndCheck(t *testing.T) {
	in, want := readTestdata(t, "comments.in.yaml"), readTestdata(t, "comments.out.yaml")
	code, out, errs := runCommand(t, in)
	if code != ExitOK || out != want || errs != skippedLines {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	code, out, errs = runCommand(t, in, "--check")
	if code != ExitChanged || out != "" || !strings.Contains(errs, "stdin: document 2, Deployment shop/web (spec.template): would move app/livenessProbe, app/readinessProbe, side/readinessProbe into the annotation; would add the readiness gate") {
		t.Errorf("--check on unconverted input: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = runCommand(t, want, "--check")
	if code != ExitOK || out != "" || strings.Count(errs, "skipped: no pod template") != 2 || strings.Count(errs, "\n") != 2 {
		t.Errorf("--check on converted input: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, _, errs = runCommand(t, readTestdata(t, "left-alone.in.yaml"))
	if code != ExitOK || !strings.Contains(errs, `Deployment keep (spec.template): skipped: opted out (probed.io/inject: "false")`) ||
		!strings.Contains(errs, "document 4 (line 63), Deployment custom: skipped: no pod template") ||
		!strings.Contains(errs, "Deployment probed-system/probed-webhook (spec.template): skipped: probed's own pods") ||
		strings.Contains(errs, "nothing to do") {
		t.Errorf("without -v: exit %d, stderr %q", code, errs)
	}
	for _, v := range []string{"-v", "-v=4", "--v=1"} {
		code, _, errs = runCommand(t, readTestdata(t, "left-alone.in.yaml"), v)
		if code != ExitOK || !strings.Contains(errs, "Deployment plain (spec.template): nothing to do") {
			t.Errorf("%s: exit %d, stderr %q", v, code, errs)
		}
	}
	// -v is a level, as kubectl's: 0 is quiet, and a word is no level.
	if code, _, errs = runCommand(t, readTestdata(t, "left-alone.in.yaml"), "-v=0"); code != ExitOK || strings.Contains(errs, "nothing to do") {
		t.Errorf("-v=0: exit %d, stderr %q", code, errs)
	}
	if code, _, _ = runCommand(t, readTestdata(t, "left-alone.in.yaml"), "-v=loud"); code != ExitError {
		t.Errorf("-v=loud: exit %d, want %d", code, ExitError)
	}
}

// An error names the input, the document and the object; nothing is
// written to stdout; the exit code is 2.
func TestCommandError(t *testing.T) {
	in := readTestdata(t, "kinds.in.yaml") + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  template:\n    metadata:\n      annotations:\n        probed.io/probes: '{'\n    spec:\n      containers: [{name: app}]\n"
	code, out, errs := runCommand(t, in)
	if code != ExitError || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	if !strings.HasPrefix(errs, "probed convert: stdin: document 9 (line 137), Deployment shop/web (spec.template, line 143): annotation \"probed.io/probes\": ") {
		t.Errorf("stderr %q", errs)
	}
}

// Named files: converted in order to stdout, separated; with -w, written
// back in place (mode kept), unchanged files untouched; when one file
// fails, no file is written.
func TestCommandFiles(t *testing.T) {
	dir := t.TempDir()
	a, b, bad := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "bad.yaml")
	write := func(p, s string, mode os.FileMode) {
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	crlfIn := readTestdata(t, "crlf.in.yaml")
	write(a, crlfIn, 0o640)
	write(b, readTestdata(t, "left-alone.in.yaml"), 0o644)
	write(bad, "kind: [\n", 0o644)

	code, out, errs := runCommand(t, "", a, b)
	want := readTestdata(t, "crlf.out.yaml") + "---\n" + readTestdata(t, "left-alone.in.yaml")
	if code != ExitOK || out != want {
		t.Errorf("exit %d, stderr %q, stdout:\n%q\nwant\n%q", code, errs, out, want)
	}

	code, out, errs = runCommand(t, "", "-w", a, b, bad)
	if code != ExitError || out != "" || !strings.Contains(errs, bad+": document 1 (line 1): yaml:") {
		t.Errorf("-w with a bad file: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if got, _ := os.ReadFile(a); string(got) != crlfIn {
		t.Error("a file was written although another one failed")
	}

	stB, _ := os.Stat(b)
	code, out, errs = runCommand(t, "", "-w", a, b)
	if code != ExitOK || out != "" || strings.Count(errs, "skipped: ") != 4 {
		t.Errorf("-w: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if got, _ := os.ReadFile(a); string(got) != readTestdata(t, "crlf.out.yaml") {
		t.Errorf("-w wrote %q", got)
	}
	if st, _ := os.Stat(a); st.Mode().Perm() != 0o640 {
		t.Errorf("-w changed the mode to %v", st.Mode())
	}
	if st, _ := os.Stat(b); !st.ModTime().Equal(stB.ModTime()) {
		t.Error("-w rewrote a file with nothing to change")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*probed-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	if code, _, errs := runCommand(t, "", "-w"); code != ExitError || !strings.Contains(errs, "-w needs file names") {
		t.Errorf("-w without files: exit %d, stderr %q", code, errs)
	}
}

// convert's flags are spelled as the other commands' (pflag, double
// dashes, -w and -v as shorthands); --help is on stdout; a bad flag is a
// short error, not the usage.
func TestCommandFlags(t *testing.T) {
	code, out, errs := runCommand(t, "", "--help")
	if code != ExitOK || errs != "" || !strings.Contains(out, "probed convert < deploy.yaml") {
		t.Errorf("--help: exit %d, stderr %q, stdout %q", code, errs, out)
	}
	for _, want := range []string{"      --check ", "  -w, --write ", "  -v, --v int[=1] ", "      --probe-host-policy hostPolicy "} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	for args, want := range map[string]string{
		"--bogus": "error: unknown flag: --bogus\nRun 'probed convert --help' for usage.\n",
		"-check":  "error: unknown shorthand flag: 'c' in -check\nRun 'probed convert --help' for usage.\n",
	} {
		if code, out, errs := runCommand(t, "", args); code != ExitError || out != "" || errs != want {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %q", args, code, out, errs, want)
		}
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "pod.yaml")
	in := readTestdata(t, "left-alone.in.yaml")
	if err := os.WriteFile(f, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCommand(t, "", "--write", "--check", f); code != ExitOK {
		t.Errorf("--write --check: exit %d, %q", code, errs)
	}
}

// A probe probed would not run as the kubelet does stays in the YAML, and
// one line on stderr names it and says why, with or without -v; the host
// policy is the nodes', from --probe-host-policy.
func TestCommandSaysWhatStaysWithTheKubelet(t *testing.T) {
	in := `apiVersion: batch/v1
kind: Job
metadata: {name: report, namespace: jobs}
spec:
  template:
    spec:
      restartPolicy: OnFailure
      containers:
      - name: app
        image: app
        livenessProbe:
          exec: {command: [test, -f, /tmp/alive]}
        readinessProbe:
          httpGet: {host: 10.0.0.9, port: 80, path: /ready}
`
	code, out, errs := runCommand(t, in)
	if code != ExitOK || !strings.Contains(out, "livenessProbe:\n          exec: {command: [test, -f, /tmp/alive]}") {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	want := "stdin: document 1, Job jobs/report (spec.template): app/livenessProbe stays with the kubelet: under restartPolicy OnFailure the kubelet restarts a container its liveness probe killed whatever its exit code, one probed stopped only if it exits non-zero\n" +
		"stdin: document 1, Job jobs/report (spec.template): app/readinessProbe stays with the kubelet: it sets httpGet.host: Pod Security (baseline, 1.34+) forbids host in probes and judges the pod after admission webhooks, so it stays where Pod Security sees it\n"
	if errs != want {
		t.Errorf("stderr %q\nwant   %q", errs, want)
	}
	code, _, errs = runCommand(t, in, "--probe-host-policy=pod-ips")
	if code != ExitOK || !strings.Contains(errs, `app/readinessProbe stays with the kubelet: httpGet.host "10.0.0.9": only the pod's own IPs are allowed`) {
		t.Errorf("--probe-host-policy=pod-ips: exit %d, stderr %q", code, errs)
	}
	if code, _, errs = runCommand(t, in, "--probe-host-policy=everywhere"); code != ExitError {
		t.Errorf("a bad policy: exit %d, stderr %q", code, errs)
	}
}

// What the daemon would refuse (an InvalidProbe event, a pod that never
// becomes Ready) is refused here, with the daemon's own text and exit 2,
// and nothing is written: a probe without a handler, a negative
// failureThreshold, two handlers, an annotation key naming no container.
func TestCommandRefusesWhatTheDaemonRefuses(t *testing.T) {
	const head = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  template:\n"
	for _, c := range []struct{ name, tmpl, want string }{
		{"no handler", "    spec:\n      containers:\n      - name: app\n        readinessProbe: {periodSeconds: 5}\n",
			`InvalidProbe: container "app" readinessProbe: Required value: must specify a handler type`},
		{"negative failureThreshold", "    spec:\n      containers:\n      - name: app\n        livenessProbe: {tcpSocket: {port: 80}, failureThreshold: -1}\n",
			`InvalidProbe: container "app" livenessProbe: failureThreshold: Invalid value: -1`},
		{"two handlers", "    spec:\n      containers:\n      - name: app\n        readinessProbe: {tcpSocket: {port: 80}, exec: {command: [\"true\"]}}\n",
			`InvalidProbe: container "app" readinessProbe: `},
		{"annotation key naming no container", "    metadata:\n      annotations:\n        probed.io/probes: '{\"db\": {\"readinessProbe\": {\"tcpSocket\": {\"port\": 5432}}}}'\n" +
			"    spec:\n      containers:\n      - name: app\n        readinessProbe: {tcpSocket: {port: 80}}\n",
			`InvalidProbe: annotation "probed.io/probes": container "db": Not found`},
	} {
		in := "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n" + head + c.tmpl
		for _, args := range [][]string{nil, {"--check"}} {
			code, out, errs := runCommand(t, in, args...)
			if code != ExitError || out != "" || !strings.Contains(errs, "probed convert: stdin: document 2 (line 5), Deployment shop/web (spec.template, line 11): "+c.want) {
				t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.name, args, code, out, errs, c.want)
			}
		}
	}
}

// A YAML error names the line of the file, not of its document.
func TestCommandErrorLinesCountFromTheFile(t *testing.T) {
	in := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: x\n  bad: y\n"
	code, _, errs := runCommand(t, in)
	if code != ExitError || !strings.Contains(errs, "document 3 (line 8): yaml: line 13: mapping values are not allowed in this context") {
		t.Errorf("exit %d, stderr %q; want the error at file line 13", code, errs)
	}
}

// Alpha probe fields the API server drops while their gates are off (the
// default) keep their probe in the YAML, as the webhook does; told the
// gate is on (--api-server-feature-gates), convert moves it.
func TestCommandLeavesWhatTheAPIServerWouldDrop(t *testing.T) {
	in := `apiVersion: v1
kind: Pod
metadata: {name: grpc, namespace: apps}
spec:
  containers:
  - name: app
    image: app
    livenessProbe:
      grpc: {port: 9090, mode: TLS}
`
	code, out, errs := runCommand(t, in)
	if code != ExitOK || !strings.Contains(out, "grpc: {port: 9090, mode: TLS}") ||
		!strings.Contains(errs, "app/livenessProbe stays with the kubelet: grpc.mode TLS is alpha: the API server drops it after admission unless its GRPCContainerProbeTLS gate is on") {
		t.Errorf("gate off: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = runCommand(t, in, "--api-server-feature-gates=GRPCContainerProbeTLS=true")
	if code != ExitOK || strings.Contains(out, "grpc: {port: 9090, mode: TLS}") || !strings.Contains(out, `"mode":"TLS"`) || errs != "" {
		t.Errorf("gate on: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs = runCommand(t, in, "--api-server-feature-gates=NoSuchGate=true"); code != ExitError {
		t.Errorf("an unknown gate: exit %d, stderr %q", code, errs)
	}
}
