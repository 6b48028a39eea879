package containerd

import (
	"context"
	"fmt"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/internal/execout"
	"github.com/probed-dev/probed/pkg/cri/runtimeservice"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"
)

// ContainerdCRI is the Runtime for containerd that runs exec probes the way
// the kubelet does, through CRI ExecSync, so a probe costs the node what it
// costs under the kubelet. The native client does only what CRI cannot:
//
//   - On a timeout it finds the exec's processes through the shim and /proc
//     and kills the whole tree, as Containerd does; CRI would kill the command
//     alone. Its own timer counts the probe's timeout from the command's start,
//     as containerd does (sub-second timeouts included); containerd's CRI
//     timeout is a backstop a second later.
//   - When the command has exited but processes it left behind hold its
//     output open, they are killed at the timeout and the exit code stands.
//   - It stops containers (Containerd.StopContainer).
//
// The exec itself is created by the CRI plugin, which does not say which
// process it is: see pickExecRoot for how it is found. Output is buffered by
// containerd as under the kubelet (up to 16 MiB per stream); probed reads
// at most MaxExecAnswerBytes of it (see CRI) and cuts it to 10 KiB.
//
// It needs what Containerd needs: hostPID for the kill, and no FIFO dir.
type ContainerdCRI struct {
	cri      *runtimeservice.CRI
	native   *Containerd
	inflight inflightExecs
}

var _ cri.Runtime = (*ContainerdCRI)(nil)

// NewContainerdCRI returns the containerd-cri runtime on conn.
func NewContainerdCRI(conn *grpc.ClientConn, o cri.Options, budget *execout.Budget) (*ContainerdCRI, error) {
	native, err := New(conn, o, budget)
	if err != nil {
		return nil, err
	}
	return &ContainerdCRI{cri: runtimeservice.New(conn, budget), native: native}, nil
}

// Name is the runtime label in metrics.
func (r *ContainerdCRI) Name() string { return cri.TypeContainerdCRI }

// Ready needs both APIs: CRI for the exec, containerd's for the kill and stop.
func (r *ContainerdCRI) Ready(ctx context.Context) error {
	if err := r.cri.Ready(ctx); err != nil {
		return err
	}
	return r.native.Ready(ctx)
}

// Close closes the shared connection. Calls in flight fail.
func (r *ContainerdCRI) Close() error { return r.native.Close() }

// StopContainer is Containerd's.
func (r *ContainerdCRI) StopContainer(ctx context.Context, containerID string, grace time.Duration) error {
	return r.native.StopContainer(ctx, containerID, grace)
}

// ExecInContainer runs cmd through CRI ExecSync, and kills its process tree
// if it is still running at timeout (see ContainerdCRI). timeout <= 0 means none.
//
// The timeout counts from the command's start, as containerd counts it for
// the kubelet: when the timer finds the command younger than timeout (the
// runtime was slow to start it), it waits out the rest. A command not seen
// at all yet gets one more timeout to appear.
func (r *ContainerdCRI) ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	id, err := r.native.parseID(containerID)
	if err != nil {
		return nil, -1, err
	}
	if len(cmd) == 0 {
		return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, cri.ErrEmptyCommand)
	}
	if timeout <= 0 {
		return r.cri.ExecSync(ctx, containerID, id, cmd, 0, 0)
	}
	x := r.inflight.add(id, cmd)
	defer r.inflight.remove(x)
	type reply struct {
		out  []byte
		code int
		err  error
	}
	replies := make(chan reply, 1)
	go func() {
		out, code, err := r.cri.ExecSync(ctx, containerID, id, cmd, timeout, runtimeservice.CeilSeconds(timeout)+1)
		replies <- reply{out, code, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	waitedToAppear := false
	for {
		select {
		case rep := <-replies:
			return rep.out, rep.code, rep.err // done before the timer had to act
		case <-timer.C:
		}
		found := r.findExec(ctx, containerID, x)
		if wait := waitMore(found, bootTicks(), timeout, waitedToAppear); wait > 0 {
			waitedToAppear = waitedToAppear || found.root == 0
			timer.Reset(wait)
			continue
		}
		commandKilled := r.killExec(ctx, containerID, x, found)
		rep := <-replies
		switch {
		case ctx.Err() != nil:
			return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, ctx.Err())
		case rep.err == nil && !commandKilled:
			// The command had exited; what we killed held its output open.
			return rep.out, rep.code, nil
		}
		return nil, -1, &cri.TimeoutError{ContainerID: containerID, After: timeout}
	}
}

// waitMore says how much longer to wait before killing what the timer found
// at now (ticks since boot); 0 means kill now. A command younger than timeout
// gets the rest of it; one not seen at all gets one more timeout to appear
// (unless the container's processes cannot be seen).
func waitMore(f foundExec, now uint64, timeout time.Duration, waitedToAppear bool) time.Duration {
	switch {
	case f.root == 0 && !f.blind && !waitedToAppear:
		return timeout
	case f.alive && now >= f.start:
		if age := ticksToDuration(now - f.start); age+tick < timeout {
			return timeout - age
		}
	}
	return 0
}

// tick is /proc's time unit.
const tick = time.Second / userHZ

func ticksToDuration(t uint64) time.Duration { return time.Duration(t) * tick }

// foundExec is where a timed-out exec's processes are.
type foundExec struct {
	root  int    // its session (the command's PID); 0: none found
	alive bool   // the command itself still runs
	start uint64 // when it, or what it left, started (ticks since boot)
	blind bool   // the container's processes cannot be seen or listed
	task  containerd.Task
}

// findExec looks for x's processes in its container (see pickExecRoot).
func (r *ContainerdCRI) findExec(ctx context.Context, containerID string, x *inflightExec) foundExec {
	ctx, cancel := context.WithTimeout(r.native.withNamespace(context.WithoutCancel(ctx)), cleanupTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	t, _, err := r.native.execTarget(ctx, containerID, x.id)
	if err != nil {
		logger.V(2).Info("Timed-out exec: container not found for the kill", "containerID", containerID, "err", err)
		return foundExec{blind: true}
	}
	if !r.native.procVisible(ctx, containerID, x.id, t.task) {
		return foundExec{blind: true}
	}
	pids, err := taskPids(t.task)(ctx)
	if err != nil {
		logger.Error(err, "Timed-out exec: listing the container's processes", "containerID", containerID)
		return foundExec{blind: true}
	}
	initPID := r.native.initPID(ctx, x.id, t.task)
	root, alive, start := pickExecRoot(readProcs(pids, inCgroupOf(x.id)), initPID, x.cmd, x.start, r.inflight.othersCmds(x))
	return foundExec{root: root, alive: alive, start: start, task: t.task}
}

// killExec kills what findExec found, and reports whether that included the
// command itself.
func (r *ContainerdCRI) killExec(ctx context.Context, containerID string, x *inflightExec, f foundExec) bool {
	if f.root <= 0 {
		klog.FromContext(ctx).V(4).Info("Timed-out exec: no process of it to kill", "containerID", containerID, "blind", f.blind)
		return false
	}
	ctx, cancel := context.WithTimeout(r.native.withNamespace(context.WithoutCancel(ctx)), cleanupTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	n, err := killProcessTree(ctx, f.root, taskPids(f.task), inCgroupOf(x.id))
	if err != nil {
		logger.Error(err, "Killing a timed-out exec's processes", "containerID", containerID, "session", f.root)
	}
	logger.V(4).Info("Killed timed-out exec", "containerID", containerID, "session", f.root, "commandRunning", f.alive, "processes", n)
	return f.alive
}

// inflightExec is one exec waiting on ExecSync.
type inflightExec struct {
	id    string   // containerd's container ID
	cmd   []string // as requested
	start uint64   // bootTicks() just before the request
}

// inflightExecs tells a timed-out exec's process from those of other execs
// of ours running in the same container.
type inflightExecs struct {
	mu sync.Mutex
	m  map[*inflightExec]struct{}
}

func (s *inflightExecs) add(id string, cmd []string) *inflightExec {
	x := &inflightExec{id: id, cmd: cmd, start: bootTicks()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[*inflightExec]struct{})
	}
	s.m[x] = struct{}{}
	return x
}

func (s *inflightExecs) remove(x *inflightExec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, x)
}

// othersCmds returns the commands of the other execs in x's container.
func (s *inflightExecs) othersCmds(x *inflightExec) [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cmds [][]string
	for o := range s.m {
		if o != x && o.id == x.id {
			cmds = append(cmds, o.cmd)
		}
	}
	return cmds
}
