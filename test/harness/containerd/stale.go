package containerd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/test/harness/proc"
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
		if err != nil || proc.Exists(owner) {
			continue
		}
		if err := StopRunDir(dir); err != nil {
			fmt.Fprintf(os.Stderr, "containerd harness: cleaning up stale %s: %v\n", dir, err)
		}
	}
}

// StopRunDir stops the containerd whose state is in runDir, from the files
// Start left there, whether or not the process that started it still runs:
// pods through CRI, then containerd by its PID (only while its command line
// still names runDir's config), leftover shims, cgroups and mounts; then it
// removes runDir. A runDir without an owner file is left alone.
func StopRunDir(runDir string) error {
	b, err := os.ReadFile(filepath.Join(runDir, ownerFile))
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return fmt.Errorf("malformed %s", filepath.Join(runDir, ownerFile))
	}
	h := &Containerd{runDir: runDir, cgroupParent: f[1]}
	if b, err := os.ReadFile(filepath.Join(runDir, pidFile)); err == nil {
		h.pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if h.pid != 0 && !h.waitExit(0) {
		h.conn, err = grpc.NewClient("unix://"+h.Socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err == nil {
			h.cri = runtimeapi.NewRuntimeServiceClient(h.conn)
		}
	}
	return h.Stop()
}
