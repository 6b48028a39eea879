package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/probed-dev/probed/test/harness/proc"
)

// memRoot is tmpfs on Debian and most Linux machines.
const memRoot = "/dev/shm"

// newMemDir makes a directory on tmpfs named for this process, after
// removing those of processes that have gone (a test binary killed before
// its Stop). It fails where there is no writable tmpfs.
func newMemDir(prefix string) (string, error) {
	sweepMemDirs(prefix)
	return os.MkdirTemp(memRoot, fmt.Sprintf("%s%d-", prefix, os.Getpid()))
}

// sweepMemDirs removes prefix's directories whose owner is not running.
func sweepMemDirs(prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(memRoot, prefix+"*"))
	for _, d := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), prefix), "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 {
			continue
		}
		if !proc.Exists(n) {
			_ = os.RemoveAll(d)
		}
	}
}
