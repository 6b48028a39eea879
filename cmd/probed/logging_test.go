package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/probed-dev/probed/internal/selfexec"
)

func TestMain(m *testing.M) { selfexec.Main(m, main) }

// --logging-format=json makes every log line a JSON object (component-base's
// logger); klog's legacy flags are gone; an unknown format is refused before
// probed starts.
func TestLoggingFlags(t *testing.T) {
	run := func(args ...string) (string, int) {
		stdout, stderr, code := selfexec.Run(t, args...)
		return stdout + stderr, code
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

	if out, code := run("--logging-format=xml", "--node-name=node-a"); code != 2 || !strings.Contains(out, `invalid argument "xml" for "--logging-format" flag: must be one of ["text" "json"]`) {
		t.Errorf("--logging-format=xml: exit %d, %q", code, out)
	}
	for _, legacy := range []string{"--logtostderr=false", "--log_file=/tmp/x", "--alsologtostderr"} {
		name, _, _ := strings.Cut(legacy, "=")
		if out, code := run(legacy, "--node-name=node-a"); code != 2 || !strings.Contains(out, "unknown flag: "+name) {
			t.Errorf("%s: exit %d, %q; want it unknown", legacy, code, out)
		}
	}
}
