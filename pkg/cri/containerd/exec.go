package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/internal/execout"
	"k8s.io/klog/v2"
)

// cleanupTimeout bounds the calls that tidy up after an exec. They run on a
// context detached from the caller's, because they must run even after it is done.
const cleanupTimeout = 10 * time.Second

// ExecInContainer runs cmd with the container's own process spec (env, cwd,
// user, capabilities, rlimits, ...) and only the arguments replaced.
//
// The timeout covers the whole call, setup included; timeout <= 0 means none.
// On timeout the command, its descendants and what is left of its session
// are stopped and killed (see killProcessTree), the exec is deleted from the
// shim, and a *TimeoutError is returned. stdout and stderr go into two 10 KiB buffers;
// anything beyond is read and dropped, so a chatty command never blocks and
// never costs memory; what the exec holds counts against the node's output
// budget from its start (see execout.Budget). The exec's FIFOs are removed on
// every path.
//
// When the command exits but processes it left behind keep the output pipe
// open, the output is read until the timeout, then those processes are
// killed; the exit code is returned as it was.
func (r *Containerd) ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	id, err := r.parseID(containerID)
	if err != nil {
		return nil, -1, err
	}
	if len(cmd) == 0 {
		return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, cri.ErrEmptyCommand)
	}
	ctx = r.withNamespace(ctx)
	runCtx, cancel := execout.WithOptionalTimeout(ctx, timeout)
	defer cancel()

	// The exec's buffers count against the node's output budget while it runs.
	release, err := r.budget.Reserve(runCtx, execout.NativeExecCost)
	if err != nil {
		if ctx.Err() != nil {
			return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, ctx.Err())
		}
		return nil, -1, &cri.OutputBudgetError{ContainerID: containerID, Budget: r.budget.Size()}
	}
	defer release()

	x, err := r.startExec(runCtx, containerID, id, cmd)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, ctx.Err())
		case runCtx.Err() != nil:
			return nil, -1, &cri.TimeoutError{ContainerID: containerID, After: timeout}
		}
		return nil, -1, err
	}
	defer x.cleanup(ctx)

	select {
	case st := <-x.exitCh:
		code, _, err := st.Result()
		if err != nil {
			return nil, -1, fmt.Errorf("exec in container %s: wait for exit: %w", containerID, err)
		}
		x.drain(runCtx)
		return execout.Combine(x.stdout.Bytes(), x.stderr.Bytes()), int(code), nil
	case <-runCtx.Done():
		x.kill(ctx)
		if ctx.Err() != nil {
			return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, ctx.Err())
		}
		return nil, -1, &cri.TimeoutError{ContainerID: containerID, After: timeout}
	}
}

// execution is one started exec and what it takes to tear it down.
type execution struct {
	r              *Containerd
	containerID    string // qualified, for messages
	id             string // containerd's
	task           containerd.Task
	proc           containerd.Process
	stdout, stderr *execout.CappedBuffer
	exitCh         <-chan containerd.ExitStatus
	stopWait       context.CancelFunc
}

func (r *Containerd) startExec(ctx context.Context, containerID, id string, cmd []string) (*execution, error) {
	for attempt := 0; ; attempt++ {
		t, cached, err := r.execTarget(ctx, containerID, id)
		if err != nil {
			return nil, err
		}
		x, err := r.startExecOn(ctx, containerID, id, t, cmd)
		if err != nil && cached {
			r.targets.drop(id, t)
			// A task that is gone may have been replaced: look again. A
			// fresh lookup explains why, if it fails too.
			if attempt == 0 && ctx.Err() == nil && (errdefs.IsNotFound(err) || errors.Is(err, cri.ErrContainerNotRunning)) {
				continue
			}
		}
		return x, err
	}
}

func (r *Containerd) startExecOn(ctx context.Context, containerID, id string, t *execTarget, cmd []string) (_ *execution, retErr error) {
	task := t.task
	pspec := *t.proc // a copy: only the arguments and the terminal differ
	pspec.Args = cmd
	pspec.CommandLine = ""
	pspec.Terminal = false
	pspec.ConsoleSize = nil

	// From here on the shim holds state for this exec. Creating and starting
	// it are not cut short by the timeout: giving up half-way (runc exec still
	// running in the shim) would leave a process we know nothing of. The
	// caller sees the timeout as soon as Start returns.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	x := &execution{r: r, containerID: containerID, id: id, task: task,
		stdout: execout.NewCappedBuffer(cri.MaxOutputBytes), stderr: execout.NewCappedBuffer(cri.MaxOutputBytes)}
	execID := newExecID()
	var err error
	x.proc, err = task.Exec(sctx, execID, &pspec,
		cio.NewCreator(cio.WithStreams(nil, x.stdout, x.stderr), cio.WithFIFODir(r.fifoDir)))
	if err != nil { // Exec has removed its FIFOs already.
		if sctx.Err() != nil {
			r.forgetExec(ctx, id, execID) // the shim may have registered it before we gave up
		}
		return nil, fmt.Errorf("exec in container %s: create exec: %w", containerID, r.classify(sctx, task, err))
	}
	// Wait before Start, or a fast exit could be missed. Its context outlives
	// the timeout, so the same channel reports the exit after a kill.
	waitCtx, stopWait := context.WithCancel(context.WithoutCancel(ctx))
	x.stopWait = stopWait
	defer func() {
		if retErr != nil {
			x.cleanup(ctx)
		}
	}()
	if x.exitCh, err = x.proc.Wait(waitCtx); err != nil {
		return nil, fmt.Errorf("exec in container %s: wait: %w", containerID, err)
	}
	if err := x.proc.Start(sctx); err != nil {
		return nil, fmt.Errorf("exec in container %s: start %q: %w", containerID, cmd[0], r.classify(sctx, task, err))
	}
	klog.FromContext(ctx).V(5).Info("Exec started", "containerID", containerID, "execID", execID, "pid", x.proc.Pid())
	return x, nil
}

// forgetExec deletes an exec whose creation we stopped waiting for.
func (r *Containerd) forgetExec(ctx context.Context, id, execID string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, err := r.client.TaskService().DeleteProcess(cctx, &tasks.DeleteProcessRequest{ContainerID: id, ExecID: execID})
	if err != nil && !errdefs.IsNotFound(errgrpc.ToNative(err)) {
		klog.FromContext(ctx).V(2).Info("Deleting an exec whose creation timed out", "containerID", id, "execID", execID, "err", err)
	}
}

// loadedSpec decodes the spec LoadContainer already fetched; c.Spec would
// fetch the whole container record again.
func loadedSpec(ctx context.Context, c containerd.Container) (*oci.Spec, error) {
	info, err := c.Info(ctx, containerd.WithoutRefreshedMetadata)
	if err != nil {
		return nil, err
	}
	if info.Spec == nil {
		return nil, errors.New("container has no spec")
	}
	var s oci.Spec
	if err := json.Unmarshal(info.Spec.GetValue(), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// runningTask returns the container's task. Its state is not checked here:
// containerd reports "unknown" when the shim is merely slow to answer, and an
// exec into a stopped task fails anyway, which classify then explains.
func runningTask(ctx context.Context, c containerd.Container) (containerd.Task, error) {
	task, err := c.Task(ctx, nil)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%w: it has no task", cri.ErrContainerNotRunning)
		}
		return nil, fmt.Errorf("load task: %w", err)
	}
	return task, nil
}

// classify turns a failed Exec or Start into ErrContainerNotRunning when the
// container stopped meanwhile, and keeps the runtime's error otherwise.
func (r *Containerd) classify(ctx context.Context, task containerd.Task, err error) error {
	if ctx.Err() != nil {
		return err
	}
	st, serr := task.Status(ctx)
	if errdefs.IsNotFound(serr) || (serr == nil && st.Status != containerd.Running && st.Status != containerd.Unknown) {
		return fmt.Errorf("%w: task is %s (%v)", cri.ErrContainerNotRunning, st.Status, err)
	}
	return err
}

// drainGrace is how long output may take to flush once the processes that
// held it open are killed.
const drainGrace = time.Second

// drain waits until the shim has passed on all output. If the command left
// processes behind that keep the output open (`sh -c 'daemon &'`), then once
// ctx is done they are killed, as part of the command's session, and the
// FIFOs are closed; otherwise the shim would hold the exec for 2 more seconds.
func (x *execution) drain(ctx context.Context) {
	done := make(chan struct{})
	go func() { x.proc.IO().Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	n := x.r.killTree(cctx, x)
	klog.FromContext(ctx).V(2).Info("Exec output held open past the timeout by processes the command left behind",
		"containerID", x.containerID, "execID", x.proc.ID(), "killed", n)
	select {
	case <-done:
	case <-time.After(drainGrace):
		x.proc.IO().Cancel()
		<-done
	}
}

// kill stops the command's process tree, kills the command through the shim
// too (the one signal that needs no /proc), and waits for its exit.
func (x *execution) kill(ctx context.Context) {
	logger := klog.FromContext(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	start := time.Now()
	n := x.r.killTree(cctx, x)
	if err := x.proc.Kill(cctx, syscall.SIGKILL); err != nil && !errdefs.IsNotFound(err) && !errdefs.IsFailedPrecondition(err) {
		logger.Error(err, "Killing timed-out exec", "containerID", x.containerID, "execID", x.proc.ID())
	}
	select {
	case <-x.exitCh:
	case <-cctx.Done():
		logger.Error(cctx.Err(), "Timed-out exec did not exit after SIGKILL", "containerID", x.containerID, "execID", x.proc.ID())
	}
	logger.V(4).Info("Killed timed-out exec", "containerID", x.containerID, "execID", x.proc.ID(), "processes", n, "took", time.Since(start))
}

// cleanup deletes the exec from the shim and removes its FIFOs, whatever
// state it is in. Safe to call on a process that never started.
func (x *execution) cleanup(ctx context.Context) {
	logger := klog.FromContext(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	start := time.Now()
	defer func() {
		logger.V(5).Info("Exec cleaned up", "containerID", x.containerID, "execID", x.proc.ID(), "took", time.Since(start))
	}()
	_, err := x.proc.Delete(cctx)
	if err != nil && !errdefs.IsNotFound(err) {
		// Still running (a kill that did not take): kill, wait and delete.
		_, err = x.proc.Delete(cctx, containerd.WithProcessKill)
		if err != nil && !errdefs.IsNotFound(err) {
			logger.Error(err, "Deleting exec", "containerID", x.containerID, "execID", x.proc.ID())
		}
	}
	// A successful Delete has closed the FIFOs and removed their directory;
	// otherwise do it here, so nothing is left in the FIFO dir.
	if err != nil {
		io := x.proc.IO()
		io.Cancel()
		io.Wait()
		_ = io.Close()
	}
	x.stopWait()
}

func newExecID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "probed-" + hex.EncodeToString(b)
}
