package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSweepMemDirs checks that a tmpfs directory whose process has gone is
// removed and one whose process runs is kept.
func TestSweepMemDirs(t *testing.T) {
	if _, err := os.Stat(memRoot); err != nil {
		t.Skipf("no %s: %v", memRoot, err)
	}
	const prefix = "probed-sweep-test-"
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(memRoot, fmt.Sprintf("%s%d-x", prefix, gone.Process.Pid))
	if err := os.Mkdir(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(stale) })
	live, err := newMemDir(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(live) })
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s of a process that has gone is still there (stat: %v)", stale, err)
	}
	sweepMemDirs(prefix)
	if _, err := os.Stat(live); err != nil {
		t.Errorf("%s of this process was removed: %v", live, err)
	}
}
