package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runMainEnv makes this test binary run probed's main instead of the tests:
// a test runs probed as a process without building it again (a second,
// non-race compile of all it imports, minutes on a cold cache).
const runMainEnv = "PROBED_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// probedCommand runs probed's main with args, in this test binary.
func probedCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	return cmd
}

// --logging-format=json makes every log line a JSON object (component-base's
// logger); klog's legacy flags are gone; an unknown format is refused before
// probed starts.
func TestLoggingFlags(t *testing.T) {
	run := func(args ...string) (string, int) {
		cmd := probedCommand(t, args...)
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
