// Package proc runs the test harnesses' child processes (etcd,
// kube-apiserver, the kubelet and its companions): output appended to a log
// file with a header per start, the PID in a file so a later process can
// stop it, and stopping by PID only, since other tests on this machine run
// the same binaries at the same time.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options tune Start.
type Options struct {
	// Env replaces the child's environment; nil inherits ours.
	Env []string
	// Dir is the child's working directory; "" is ours.
	Dir string
	// Detached children get their own session: they outlive the test
	// process and ignore the terminal's Ctrl-C and hang-up (the demo starts
	// a node and exits). Others get SIGKILL when the test process dies, so
	// a crashed test leaves nothing holding ports and files.
	Detached bool
}

// Process is one running (or ended) child.
type Process struct {
	Name    string
	LogPath string
	PIDFile string
	cmd     *exec.Cmd
	logFrom int64         // where this start's output begins in the log
	done    chan struct{} // closed once the child has been reaped
	waitErr error         // valid after done is closed
}

// Start runs bin with args, appending its stdout and stderr to logPath and
// writing its PID to pidFile, which is removed once the child is reaped (a
// stale PID file could later name an unrelated process).
func Start(name, logPath, pidFile, bin string, args []string, opts Options) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// A header per start, so a restarted child's log reads as one story.
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	st, err := logFile.Stat()
	if err != nil {
		logFile.Close()
		return nil, err
	}

	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env, cmd.Dir = opts.Env, opts.Dir
	if opts.Detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Linux sends it when the starting OS thread exits; the Go runtime
		// only retires threads locked by LockOSThread, which we never do.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		return nil, fmt.Errorf("write %s: %w", pidFile, err)
	}
	p := &Process{Name: name, LogPath: logPath, PIDFile: pidFile, cmd: cmd, logFrom: st.Size(), done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		_ = os.Remove(pidFile)
		close(p.done)
	}()
	return p, nil
}

// PID is the child's process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the child has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Done is closed once the child has ended and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr is how the child ended (nil: exit 0); valid once Done is closed.
func (p *Process) ExitErr() error {
	<-p.done
	return p.waitErr
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs, and always waits for
// the child to be reaped so that its PID and ports are really free on return.
func (p *Process) Stop(grace time.Duration) error {
	_, err := p.Terminate(grace)
	return err
}

// Terminate is Stop that also says whether the child outlived grace after
// SIGTERM and had to be SIGKILLed.
func (p *Process) Terminate(grace time.Duration) (killed bool, err error) {
	if done, _ := p.Exited(); done {
		return false, nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return false, fmt.Errorf("SIGTERM %s (pid %d): %w", p.Name, p.PID(), err)
	}
	select {
	case <-p.done:
		return false, nil
	case <-time.After(grace):
	}
	return true, p.Kill()
}

// Kill sends SIGKILL and waits for the child to be reaped.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL %s (pid %d): %w", p.Name, p.PID(), err)
	}
	<-p.done
	return nil
}

// Failure builds an error that carries the tail of the child's log, which is
// where the real reason (a bad flag, a port in use) is.
func (p *Process) Failure(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if done, err := p.Exited(); done {
		msg += fmt.Sprintf(" (%s exited: %v)", p.Name, err)
	}
	return fmt.Errorf("%s; last lines of %s:\n%s", msg, p.LogPath, Tail(p.LogPath, 30))
}

// Output is what the child has written since this start (its log after
// the header, which names its arguments).
func (p *Process) Output() ([]byte, error) {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < p.logFrom {
		return nil, fmt.Errorf("%s shrank", p.LogPath)
	}
	return b[p.logFrom:], nil
}

// LogSays reports whether this run of the child logged s; used to tell a
// lost port race (worth a retry) from a real failure.
func (p *Process) LogSays(s string) bool {
	b, err := p.Output()
	return err == nil && bytes.Contains(b, []byte(s))
}

// Tail returns the last n lines of a file, or a note if it cannot be read.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Exists reports whether a process with this PID runs (one of another user
// counts too).
func Exists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
