package containerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxTreeRounds bounds the stop rounds; a fork bomb should not keep us here.
const maxTreeRounds = 20

// killProcessTree kills an exec'd command's processes among the candidates
// that list returns, and returns how many it signalled. They are root, its
// descendants, and whatever is left of root's session: runc makes every exec'd
// process a session leader, and a child keeps that session after its parent
// dies and it is re-parented to the container's init. Root may be gone already.
// Only a process that both leaves the session and is orphaned (a daemon's
// double fork) escapes.
//
// It first SIGSTOPs them, round by round, until a round finds nothing new: a
// stopped process cannot fork, so the set stops growing. Only then does it
// SIGKILL them all, so no child escapes by being orphaned mid-way.
//
// Each candidate is pinned with a pidfd before it is checked (owned, parent,
// session), and signalled through that pidfd, so a PID reused meanwhile is
// never hit.
func killProcessTree(ctx context.Context, root int, list func(context.Context) ([]int, error), owned func(pid int) bool) (int, error) {
	members := map[int]procHandle{}
	defer func() {
		for _, h := range members {
			h.close()
		}
	}()
	var listErr error
	for round := 0; round < maxTreeRounds; round++ {
		pids, err := list(ctx)
		if err != nil {
			listErr = err
			break
		}
		if stopNewMembers(root, pids, members, owned) == 0 {
			break
		}
	}
	for _, h := range members {
		_ = h.signal(unix.SIGKILL)
	}
	if listErr != nil && len(members) == 0 {
		return 0, fmt.Errorf("list processes: %w", listErr)
	}
	return len(members), nil
}

// stopNewMembers adds to members every candidate that is root, in root's
// session, or a child of a member; stops it; and returns how many it added.
func stopNewMembers(root int, pids []int, members map[int]procHandle, owned func(int) bool) int {
	type candidate struct {
		h    procHandle
		ppid int
	}
	cands := map[int]candidate{}
	added := 0
	for _, pid := range pids {
		if _, ok := members[pid]; ok || pid <= 1 {
			continue
		}
		h, err := openProc(pid)
		if err != nil {
			continue // already gone
		}
		st, err := readStat(pid)
		if err != nil || !owned(pid) {
			h.close()
			continue
		}
		if pid == root || st.session == root {
			_ = h.signal(unix.SIGSTOP)
			members[pid] = h
			added++
			continue
		}
		cands[pid] = candidate{h, st.ppid}
	}
	for changed := true; changed; {
		changed = false
		for pid, c := range cands {
			if _, parentIn := members[c.ppid]; parentIn {
				_ = c.h.signal(unix.SIGSTOP)
				members[pid] = c.h
				delete(cands, pid)
				added++
				changed = true
			}
		}
	}
	for _, c := range cands {
		c.h.close()
	}
	return added
}

// procHandle signals one process, through a pidfd where the kernel has them (5.3+).
type procHandle struct{ pid, fd int }

func openProc(pid int) (procHandle, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		return procHandle{pid: pid, fd: fd}, nil
	case errors.Is(err, unix.ESRCH):
		return procHandle{}, err
	}
	return procHandle{pid: pid, fd: -1}, nil // no pidfds: plain PIDs, a small reuse window
}

func (h procHandle) signal(sig unix.Signal) error {
	if h.fd >= 0 {
		return unix.PidfdSendSignal(h.fd, sig, nil, 0)
	}
	return unix.Kill(h.pid, sig)
}

func (h procHandle) close() {
	if h.fd >= 0 {
		_ = unix.Close(h.fd)
	}
}

// procStat is what we need from /proc/<pid>/stat. start is in clock ticks
// since boot.
type procStat struct {
	ppid, session int
	start         uint64
}

// readStat parses /proc/<pid>/stat. The command name may hold spaces and
// parentheses, so fields are counted after its last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:])) // state ppid pgrp session ... (field 22, starttime, is f[19])
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	session, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return procStat{ppid: ppid, session: session, start: start}, nil
}

// bootTicks is now in /proc/<pid>/stat's starttime unit: clock ticks of
// CLOCK_BOOTTIME, which the kernel counts process start times in.
func bootTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)*userHZ + uint64(ts.Nsec)/(1e9/userHZ)
}

// readCmdline returns /proc/<pid>/cmdline's arguments.
func readCmdline(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// inContainerCgroup reports whether /proc/<pid>/cgroup places the process in
// the container's cgroup: a path component that is the ID, or that ends in
// "-<id>" (systemd's cri-containerd-<id>.scope). This is what guards against a
// /proc that is not the host's (no hostPID): the same PID there is someone else.
func inContainerCgroup(pid int, id string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, comp := range strings.Split(parts[2], "/") {
			comp = strings.TrimSuffix(comp, ".scope")
			if comp == id || strings.HasSuffix(comp, "-"+id) {
				return true
			}
		}
	}
	return false
}

// readProcs reads the owned processes among pids; those gone are skipped.
func readProcs(pids []int, owned func(int) bool) []procInfo {
	procs := make([]procInfo, 0, len(pids))
	for _, pid := range pids {
		st, err := readStat(pid)
		if err != nil || !owned(pid) {
			continue
		}
		cmdline, _ := readCmdline(pid)
		procs = append(procs, procInfo{pid: pid, session: st.session, start: st.start, cmdline: cmdline})
	}
	return procs
}
