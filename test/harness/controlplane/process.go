package controlplane

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

// process is one child (etcd or kube-apiserver) whose output goes to a log
// file. It is stopped by its PID only: other engineers' tests run the same
// binaries on this machine at the same time.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	logFrom int64         // size of the log before this start
	done    chan struct{} // closed once the child has been reaped
	waitErr error         // valid after done is closed
}

// startProcess runs bin with args, appending its stdout and stderr to logPath,
// and writes its PID to <name>.pid next to the log. The child is not tied to
// any context: its lifetime is controlled by stop. A detached child is in its
// own session and survives this process; otherwise it is killed with it.
func startProcess(name, logPath, bin string, args []string, detached bool) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := logFile.Stat()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	// A header per start, so a restarted apiserver's log reads as one story.
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// If the test binary dies (panic, go test -timeout), take the child
		// with it instead of leaving an orphan holding ports and files.
		// (Linux sends it when the starting OS thread exits; the Go runtime
		// only retires threads locked by LockOSThread, which we never do.)
		Pdeathsig: syscall.SIGKILL,
	}
	if detached {
		// Its own session: no parent-death signal, and no SIGINT/SIGHUP
		// from the terminal that started us.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	pidFile := filepath.Join(filepath.Dir(logPath), name+".pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		return nil, fmt.Errorf("write %s: %w", pidFile, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, logFrom: st.Size(), done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		// A stale PID file could later name an unrelated process.
		_ = os.Remove(pidFile)
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the child has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs, and always waits for
// the child to be reaped so that its PID and ports are really free on return.
func (p *process) stop(grace time.Duration) error {
	if done, _ := p.exited(); done {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM %s (pid %d): %w", p.name, p.pid(), err)
	}
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

// failure builds a start error that carries the tail of the child's log,
// which is where the real reason (a bad flag, a port in use) is.
func (p *process) failure(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if done, err := p.exited(); done {
		msg += fmt.Sprintf(" (%s exited: %v)", p.name, err)
	}
	msg = fmt.Sprintf("%s; last lines of %s:\n%s", msg, p.logPath, tailFile(p.logPath, 30))
	if p.logSays("address already in use") {
		return fmt.Errorf("%w: %s", errPortTaken, msg)
	}
	return errors.New(msg)
}

// tailFile returns the last n lines of a file, or a note if it cannot be read.
func tailFile(path string, n int) string {
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

// logSays reports whether this run of the child logged s; used to tell a
// lost port race (worth a retry) from a real failure.
func (p *process) logSays(s string) bool {
	b, err := os.ReadFile(p.logPath)
	if err != nil || int64(len(b)) < p.logFrom {
		return false
	}
	return bytes.Contains(b[p.logFrom:], []byte(s))
}
