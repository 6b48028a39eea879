package node

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/probed-dev/probed/test/harness/proc"
)

// startProcess starts one child (kube-controller-manager, kube-scheduler,
// kubelet) logging to <dir>/<name>.log, with its PID in <dir>/<name>.pid so
// that a later process can stop it (StopRunDir).
func startProcess(dir, name, bin string, args []string, detached bool) (*proc.Process, error) {
	return proc.Start(name, filepath.Join(dir, name+".log"), filepath.Join(dir, name+".pid"), bin, args, proc.Options{
		Env:      append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
		Detached: detached,
	})
}

// stopPIDFile stops the process whose PID is in pidFile, started by an
// earlier process: SIGTERM, then SIGKILL after grace. The PID counts only
// while the process's command line contains marker (its run dir), so a PID
// the kernel has since given to someone else is never signalled. A missing
// PID file means there is nothing to stop.
func stopPIDFile(pidFile, marker string, grace time.Duration) error {
	b, err := os.ReadFile(pidFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("%s: bad PID %q", pidFile, b)
	}
	defer os.Remove(pidFile)
	if !pidRuns(pid, marker) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(pid, marker, grace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(pid, marker, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("pid %d from %s did not exit after SIGKILL", pid, pidFile)
}

// pidRuns reports whether pid is a live process whose command line contains
// marker. A zombie has an empty command line, so it does not count.
func pidRuns(pid int, marker string) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(cmdline, []byte(marker))
}

func waitGone(pid int, marker string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for pidRuns(pid, marker) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
