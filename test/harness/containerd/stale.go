package containerd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	runDirPrefix = "probed-ctrd-"
	// ownerFile holds "<test process PID> <cgroup parent>".
	ownerFile = "owner"
	pidFile   = "containerd.pid"
)

// sweepStale cleans up after harnesses whose test process died without
// calling Stop (a panic, a test timeout, kill -9). A run dir is stale only
// when the process that owns it is gone, so harnesses of tests running
// concurrently on the machine are left alone.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), runDirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // still being set up, or not ours
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			continue
		}
		owner, err := strconv.Atoi(f[0])
		if err != nil || processExists(owner) {
			continue
		}
		h := &Containerd{runDir: dir, cgroupParent: f[1]}
		if b, err := os.ReadFile(filepath.Join(dir, pidFile)); err == nil {
			h.pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if err := h.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "containerd harness: cleaning up stale %s: %v\n", dir, err)
		}
	}
}

func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
