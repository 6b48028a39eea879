package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one child (kube-controller-manager, kube-scheduler, kubelet)
// logging to <dir>/<name>.log, with its PID in <dir>/<name>.pid so that a
// later process can stop it (StopRunDir). It is stopped by PID only.
type process struct {
	name    string
	logPath string
	pidFile string
	cmd     *exec.Cmd
	done    chan struct{} // closed once reaped
	waitErr error
}

// startProcess starts bin. Unless detached, the child gets SIGKILL when this
// process dies, so a crashed test leaves nothing holding ports. A detached
// child has its own session: it outlives us and ignores the terminal's
// Ctrl-C and hang-up (the demo starts a node and exits).
func startProcess(dir, name, bin string, args []string, detached bool) (*process, error) {
	p := &process{
		name:    name,
		logPath: filepath.Join(dir, name+".log"),
		pidFile: filepath.Join(dir, name+".pid"),
		done:    make(chan struct{}),
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	if detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd = cmd
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	if err := os.WriteFile(p.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = p.stop(0)
		return nil, err
	}
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs and waits until the
// child is reaped. It removes the PID file.
func (p *process) stop(grace time.Duration) error {
	defer os.Remove(p.pidFile)
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL %s (pid %d): %w", p.name, p.pid(), err)
	}
	<-p.done
	return nil
}

// failure wraps an error with the tail of the child's log.
func (p *process) failure(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if p.exited() {
		msg += fmt.Sprintf(" (%s exited: %v)", p.name, p.waitErr)
	}
	return fmt.Errorf("%s; last lines of %s:\n%s", msg, p.logPath, tail(p.logPath, 25))
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
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
