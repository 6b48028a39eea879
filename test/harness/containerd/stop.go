package containerd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Stop removes every pod through CRI, stops containerd by PID, kills whatever
// is left in this harness's cgroup parent and any shim still serving this
// containerd's socket, unmounts everything under the run dir and deletes it.
// It is safe to call more than once; later calls return the first result.
func (h *Containerd) Stop() error {
	h.stopOnce.Do(func() { h.stopErr = h.stop() })
	return h.stopErr
}

func (h *Containerd) stop() error {
	var errs []error
	if h.cri != nil && !h.waitExit(0) {
		errs = append(errs, h.removeAllPods())
	}
	if h.conn != nil {
		_ = h.conn.Close()
	}
	errs = append(errs, h.stopDaemon())
	// Leftovers only exist when the CRI clean-up above failed.
	errs = append(errs, h.killCgroupMembers(), h.killShims())
	errs = append(errs, h.unmountAll(), h.removeCgroups())
	if err := os.RemoveAll(h.runDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (h *Containerd) removeAllPods() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := h.cri.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range resp.Items {
		errs = append(errs, h.RemovePod(ctx, sb.Id))
	}
	return errors.Join(errs...)
}

func (h *Containerd) stopDaemon() error {
	pid := h.PID()
	if pid == 0 || h.waitExit(0) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if h.waitExit(10 * time.Second) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if h.waitExit(5 * time.Second) {
		return fmt.Errorf("containerd (pid %d) ignored SIGTERM for 10s and was killed", pid)
	}
	return fmt.Errorf("containerd (pid %d) did not exit after SIGKILL", pid)
}

// waitExit reports whether containerd has exited, waiting up to d. A
// containerd we started is reaped by its exec.Cmd; a stale one (see
// sweepStale) is polled, and its PID counts only while its command line still
// names our config, so a reused PID is never signalled.
func (h *Containerd) waitExit(d time.Duration) bool {
	if h.exited != nil {
		select {
		case <-h.exited:
			return true
		case <-time.After(d):
			return false
		}
	}
	deadline := time.Now().Add(d)
	for {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(h.pid) + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(h.path("config.toml"))) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cgroupDirs lists this harness's cgroup directories in every v1 hierarchy,
// deepest first, so they can be removed in that order.
func (h *Containerd) cgroupDirs() []string {
	var dirs []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*" + h.cgroupParent)
	for _, r := range roots {
		_ = filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

func (h *Containerd) killCgroupMembers() error {
	killed := map[int]bool{} // every process shows up once per hierarchy
	for _, d := range h.cgroupDirs() {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && !killed[pid] {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed[pid] = true
				}
			}
		}
	}
	if len(killed) > 0 {
		time.Sleep(200 * time.Millisecond) // let the kernel tear them down before rmdir
		return fmt.Errorf("killed %d container processes that CRI did not remove", len(killed))
	}
	return nil
}

// killShims kills shims started for this containerd: their command line names
// our socket, which no other process on the machine uses.
func (h *Containerd) killShims() error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	needle := []byte("\x00" + h.Socket() + "\x00")
	var killed []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(append(cmdline, 0), needle) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
			removeShimSocket(cmdline)
		}
	}
	if len(killed) > 0 {
		return fmt.Errorf("killed leftover shims %v", killed)
	}
	return nil
}

// unmountAll detaches every mount under the run dir, deepest first
// (rootfs overlays, sandbox shm, netns files).
func (h *Containerd) unmountAll() error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if p == h.runDir || strings.HasPrefix(p, h.runDir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func (h *Containerd) removeCgroups() error {
	var errs []error
	for _, d := range h.cgroupDirs() {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for space, ...).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeShimSocket deletes the socket a killed shim leaves in
// /run/containerd/s. Its name is derived the way containerd derives it:
// sha256 of <containerd address>/<namespace>/<shim id>.
func removeShimSocket(cmdline []byte) {
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	flags := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			flags[strings.TrimLeft(args[i], "-")] = args[i+1]
		}
	}
	if flags["address"] == "" || flags["namespace"] == "" || flags["id"] == "" {
		return
	}
	sum := sha256.Sum256([]byte(filepath.Join(flags["address"], flags["namespace"], flags["id"])))
	_ = os.Remove(filepath.Join("/run/containerd/s", hex.EncodeToString(sum[:])))
}
