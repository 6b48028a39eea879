// Package selfexec lets a command's tests run its main as a process
// without building it again: the test binary runs main instead of the tests
// when an environment variable says so. A second, non-race build of all a
// command imports costs minutes on a cold cache.
package selfexec

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"
)

const env = "PROBED_TEST_RUN_MAIN"

// Main is a command's TestMain: main when the test binary was started by
// Command, else the tests.
func Main(m *testing.M, main func()) {
	if os.Getenv(env) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Command runs the command's main with args, in this test binary.
func Command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), env+"=1")
	return cmd
}

// Run runs the command's main with args and returns what it wrote and its
// exit code.
func Run(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := Command(t, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}
