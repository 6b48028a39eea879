package cri

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
)

// ContainerdCRI is the Runtime for containerd that runs exec probes the way
// the kubelet does, through CRI ExecSync, so a probe costs the node what it
// costs under the kubelet. The native client does only what CRI cannot:
//
//   - On a timeout it finds the exec's processes through the shim and /proc
//     and kills the whole tree, as Containerd does; CRI would kill the command
//     alone. Its own timer fires at the probe's timeout (sub-second ones
//     included); containerd's CRI timeout is a backstop a second later.
//   - When the command has exited but processes it left behind hold its
//     output open, they are killed at the timeout and the exit code stands.
//   - It stops containers (Containerd.StopContainer).
//
// The exec itself is created by the CRI plugin, which does not say which
// process it is: see pickExecRoot for how it is found. Output is buffered by
// containerd as under the kubelet (up to 16 MiB per stream) and cut to 10 KiB.
//
// It needs what Containerd needs: hostPID for the kill, and no FIFO dir.
type ContainerdCRI struct {
	cri      *CRI
	native   *Containerd
	inflight inflightExecs
}

var _ Runtime = (*ContainerdCRI)(nil)

func newContainerdCRI(conn *grpc.ClientConn, o Options) (*ContainerdCRI, error) {
	native, err := newContainerd(conn, o)
	if err != nil {
		return nil, err
	}
	return &ContainerdCRI{cri: newCRI(conn), native: native}, nil
}

// Name is the runtime label in metrics.
func (r *ContainerdCRI) Name() string { return TypeContainerdCRI }

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
func (r *ContainerdCRI) ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	id, err := r.native.parseID(containerID)
	if err != nil {
		return nil, -1, err
	}
	if len(cmd) == 0 {
		return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, ErrEmptyCommand)
	}
	if timeout <= 0 {
		return r.cri.execSync(ctx, containerID, id, cmd, 0, 0)
	}
	x := r.inflight.add(id, cmd)
	defer r.inflight.remove(x)
	var killed killOutcome
	killDone := make(chan struct{})
	timer := time.AfterFunc(timeout, func() {
		defer close(killDone)
		killed = r.killTimedOut(ctx, containerID, x)
	})
	out, code, err := r.cri.execSync(ctx, containerID, id, cmd, timeout, ceilSeconds(timeout)+1)
	if timer.Stop() {
		return out, code, err // done before the timeout
	}
	<-killDone
	switch {
	case ctx.Err() != nil:
		return nil, -1, fmt.Errorf("exec in container %s: %w", containerID, ctx.Err())
	case err == nil && !killed.rootAlive:
		// The command had exited; what we killed held its output open.
		return out, code, nil
	}
	return nil, -1, &TimeoutError{ContainerID: containerID, After: timeout}
}

// killOutcome is what a timeout's kill found.
type killOutcome struct {
	rootAlive bool // the command itself was still running
	killed    int  // processes signalled
}

// killTimedOut finds x's processes in its container and kills them: the
// command and its tree while it runs, or else what it left in its session.
func (r *ContainerdCRI) killTimedOut(ctx context.Context, containerID string, x *inflightExec) killOutcome {
	ctx, cancel := context.WithTimeout(r.native.withNamespace(context.WithoutCancel(ctx)), cleanupTimeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	t, _, err := r.native.execTarget(ctx, containerID, x.id)
	if err != nil {
		logger.V(2).Info("Timed-out exec: container not found for the kill", "containerID", containerID, "err", err)
		return killOutcome{}
	}
	if !r.native.procVisible(ctx, containerID, x.id, t.task) {
		return killOutcome{}
	}
	list := taskPids(t.task)
	pids, err := list(ctx)
	if err != nil {
		logger.Error(err, "Timed-out exec: listing the container's processes", "containerID", containerID)
		return killOutcome{}
	}
	owned := func(pid int) bool { return inContainerCgroup(pid, x.id) }
	initPID := r.native.initPID(ctx, x.id, t.task)
	root, alive := pickExecRoot(readProcs(pids, owned), initPID, x.cmd, x.start, r.inflight.othersCmds(x))
	if root <= 0 {
		logger.V(4).Info("Timed-out exec: no process of it left", "containerID", containerID)
		return killOutcome{}
	}
	n, err := killProcessTree(ctx, root, list, owned)
	if err != nil {
		logger.Error(err, "Killing a timed-out exec's processes", "containerID", containerID, "session", root)
	}
	logger.V(4).Info("Killed timed-out exec", "containerID", containerID, "session", root, "commandRunning", alive, "processes", n)
	return killOutcome{rootAlive: alive, killed: n}
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
