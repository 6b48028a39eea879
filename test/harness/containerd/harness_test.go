//go:build runtime

package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartRunStop checks the harness itself: a container runs, and Stop
// leaves no process, mount, cgroup or directory behind, twice over.
func TestStartRunStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	h, err := Start(ctx, Options{})
	if errors.Is(err, ErrMissingBinaries) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop() }) // a failing test must not leave containerd running
	t.Logf("containerd up with images in %v", time.Since(start))

	start = time.Now()
	c, err := h.RunContainer(ctx, ContainerSpec{Command: []string{"sh", "-c", "sleep 100000 & wait"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod + container running in %v", time.Since(start))
	out, code, err := h.Exec(ctx, c.ID, "echo", "hello")
	if err != nil || code != 0 || strings.TrimSpace(out) != "hello" {
		t.Fatalf("exec: %q %d %v", out, code, err)
	}

	pid, runDir, cgroups := h.PID(), h.RunDir(), h.cgroupDirs()
	if len(cgroups) == 0 {
		t.Errorf("no cgroups found under %s", h.cgroupParent)
	}
	if err := h.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := h.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Errorf("containerd pid %d still exists", pid)
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Errorf("run dir %s still exists: %v", runDir, err)
	}
	if left := h.cgroupDirs(); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), runDir) {
		t.Errorf("mounts left under %s", runDir)
	}
}

// TestSweepStale: a test process that dies without Stop leaves containerd,
// shims, containers and mounts behind; the next Start sweeps them up.
func TestSweepStale(t *testing.T) {
	if os.Getenv("PROBED_HARNESS_CRASH") == "1" {
		ctx := context.Background()
		h, err := Start(ctx, Options{})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		if _, err := h.RunContainer(ctx, ContainerSpec{Command: []string{"sh", "-c", "sleep 100000 & wait"}}); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("RUNDIR", h.RunDir(), h.PID(), h.cgroupParent)
		os.Exit(0) // no Stop: a crash
	}
	if _, err := exec.LookPath("containerd"); err != nil {
		t.Skip("containerd not installed")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepStale$")
	cmd.Env = append(os.Environ(), "PROBED_HARNESS_CRASH=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crashing child: %v\n%s", err, out)
	}
	var runDir, cgroupParent string
	var pid int
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "RUNDIR ") {
			_, _ = fmt.Sscan(strings.TrimPrefix(l, "RUNDIR "), &runDir, &pid, &cgroupParent)
		}
	}
	if runDir == "" {
		t.Fatalf("child output: %s", out)
	}
	h := &Containerd{runDir: runDir, cgroupParent: cgroupParent, pid: pid}
	if h.waitExit(0) || len(h.cgroupDirs()) == 0 {
		t.Fatalf("the crashed harness should have left containerd %d and its containers running", pid)
	}
	sweepStale()
	if !h.waitExit(0) {
		t.Errorf("containerd %d still running", pid)
	}
	if _, err := os.Stat(runDir); !os.IsNotExist(err) {
		t.Errorf("run dir %s still exists", runDir)
	}
	if left := h.cgroupDirs(); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), runDir) {
		t.Errorf("mounts left under %s", runDir)
	}
	if err := h.killShims(); err != nil {
		t.Errorf("shims were left: %v", err)
	}
}
