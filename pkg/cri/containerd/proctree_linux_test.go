package containerd

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri/internal/critest"
)

// allPIDs lists every process, standing in for the container's PID list.
func allPIDs(context.Context) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// descendants finds root's live descendants by walking /proc.
func descendants(t *testing.T, root int) []int {
	t.Helper()
	pids, _ := allPIDs(context.Background())
	in := map[int]bool{root: true}
	for changed := true; changed; {
		changed = false
		for _, p := range pids {
			if st, err := readStat(p); err == nil && in[st.ppid] && !in[p] {
				in[p], changed = true, true
			}
		}
	}
	delete(in, root)
	var out []int
	for p := range in {
		out = append(out, p)
	}
	return out
}

// alive is false for processes that are gone or zombies.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func startTree(t *testing.T, script string, wantChildren int) (*exec.Cmd, []int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		kids := descendants(t, cmd.Process.Pid)
		if len(kids) >= wantChildren {
			return cmd, kids
		}
		if time.Now().After(deadline) {
			t.Fatalf("tree did not grow to %d children: %v", wantChildren, kids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKillProcessTree(t *testing.T) {
	bystander := exec.Command("sleep", "300")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bystander.Process.Kill(); _ = bystander.Wait() }()

	// sh -> sleep, sh -> (sh -> sleep): grandchildren too.
	cmd, kids := startTree(t, "sleep 300 & (sleep 301 & wait) & wait", 3)
	n, err := killProcessTree(context.Background(), cmd.Process.Pid, allPIDs, func(int) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 {
		t.Errorf("killed %d processes, want at least 4", n)
	}
	_ = cmd.Wait()
	waitDead(t, kids)
	if !alive(bystander.Process.Pid) {
		t.Error("a process outside the tree was killed")
	}
}

func TestKillProcessTreeWhileForking(t *testing.T) {
	marker := "299." + strconv.Itoa(os.Getpid()) // a sleep argument no one else uses
	cmd, _ := startTree(t, "while :; do sleep "+marker+" & sleep 0.01; done", 3)
	if _, err := killProcessTree(context.Background(), cmd.Process.Pid, allPIDs, func(int) bool { return true }); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := withArg(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("forked children survived: %v", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// withArg lists live processes with arg on their command line.
func withArg(arg string) []int {
	pids, _ := allPIDs(context.Background())
	var out []int
	for _, p := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if err == nil && strings.Contains(string(b), "\x00"+arg) && alive(p) {
			out = append(out, p)
		}
	}
	return out
}

func TestKillProcessTreeRespectsOwned(t *testing.T) {
	cmd, kids := startTree(t, "sleep 300 & wait", 1)
	n, _ := killProcessTree(context.Background(), cmd.Process.Pid, allPIDs, func(pid int) bool { return pid == cmd.Process.Pid })
	if n != 1 {
		t.Fatalf("killed %d, want only the owned root", n)
	}
	_ = cmd.Wait()
	for _, k := range kids {
		if !alive(k) {
			t.Errorf("child %d not owned but killed", k)
		}
		_ = exec.Command("kill", "-9", strconv.Itoa(k)).Run()
	}
}

func waitDead(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d survived", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestReadStatOddNames(t *testing.T) {
	// A command name with spaces and parentheses must not shift the fields.
	dir := t.TempDir()
	odd := dir + "/a) b ("
	if err := os.Symlink("/bin/sleep", odd); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	st, err := readStat(cmd.Process.Pid)
	if err != nil || st.ppid != os.Getpid() {
		t.Fatalf("readStat = %+v, %v; want ppid %d", st, err, os.Getpid())
	}
}

// TestKillProcessTreeSessionOrphans: children re-parented away from a dead
// command are still found through its session.
func TestKillProcessTreeSessionOrphans(t *testing.T) {
	marker := "298." + strconv.Itoa(os.Getpid())
	cmd := exec.Command("/bin/sh", "-c", "(sleep "+marker+" &); sleep "+marker+" & exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // as runc does for an exec
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	root := cmd.Process.Pid
	_ = cmd.Wait() // root is gone; its children are orphans now
	critest.Eventually(t, "the condition", func() bool { return len(withArg(marker)) == 2 })
	n, err := killProcessTree(context.Background(), root, allPIDs, func(int) bool { return true })
	if err != nil || n != 2 {
		t.Fatalf("killed %d, %v; want the 2 orphans", n, err)
	}
	critest.Eventually(t, "the condition", func() bool { return len(withArg(marker)) == 0 })
}
