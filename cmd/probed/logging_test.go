package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// probedBinary builds cmd/probed once per test binary run.
func probedBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probed")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// --logging-format=json makes every log line a JSON object (component-base's
// logger); klog's legacy flags are gone; an unknown format is refused before
// probed starts.
func TestLoggingFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := probedBinary(t)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), code
	}

	// Starts, logs, and fails on the missing kubeconfig: every line JSON.
	out, code := run("--logging-format=json", "-v=2", "--node-name=node-a", "--kubeconfig=/nonexistent")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (no kubeconfig); output:\n%s", code, out)
	}
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var entry struct {
			Msg string `json:"msg"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("not a JSON log line: %q (%v)", line, err)
		}
		msgs = append(msgs, entry.Msg)
	}
	if len(msgs) < 2 || msgs[0] != "Starting probed" || msgs[len(msgs)-1] != "probed failed" {
		t.Errorf("log messages %q, want Starting probed ... probed failed", msgs)
	}

	if out, code := run("--logging-format=xml", "--node-name=node-a"); code != 2 || !strings.Contains(out, `invalid value "xml" for flag -logging-format: must be one of ["text" "json"]`) {
		t.Errorf("--logging-format=xml: exit %d, %q", code, out)
	}
	for _, legacy := range []string{"-logtostderr=false", "-log_file=/tmp/x", "-alsologtostderr"} {
		if out, code := run(legacy, "--node-name=node-a"); code != 2 || !strings.Contains(out, "flag provided but not defined") {
			t.Errorf("%s: exit %d, %q; want it unknown", legacy, code, out)
		}
	}
}
