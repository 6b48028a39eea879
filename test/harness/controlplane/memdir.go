package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/probed-dev/probed/test/harness/proc"
)

const (
	// memRoot is tmpfs on Debian and most Linux machines.
	memRoot = "/dev/shm"
	// etcdMemPrefix names etcd's data directories in memRoot.
	etcdMemPrefix = "probed-etcd-"
)

// newMemDir makes a directory on tmpfs named for this process, after
// removing those of processes that have gone (a test binary killed before
// its Stop). It fails where there is no writable tmpfs.
func newMemDir(prefix string) (string, error) {
	sweepMemDirs(prefix)
	return os.MkdirTemp(memRoot, fmt.Sprintf("%s%d-", prefix, os.Getpid()))
}

// SweepStale removes etcd's data of control planes whose test process died
// before its Stop (etcd itself died with it: a parent-death signal). Start
// does it too; a harness that sweeps up after crashed tests calls it.
func SweepStale() { sweepMemDirs(etcdMemPrefix) }

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
