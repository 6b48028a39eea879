package cri

import (
	"context"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"k8s.io/klog/v2"
)

// killTree kills an exec's processes: the command, its descendants and its
// session's leftovers (see killProcessTree); the command may have exited.
// Candidates are the PIDs in the container's cgroup as the shim lists them
// (host PIDs), and each must show that cgroup in /proc, so nothing outside
// the container is ever signalled. It returns how many it killed.
func (r *Containerd) killTree(ctx context.Context, x *execution) int {
	logger := klog.FromContext(ctx)
	root := int(x.proc.Pid())
	if root <= 0 {
		return 0
	}
	// The container's init is alive and in the cgroup for as long as the
	// container runs: if this /proc does not show it there, it is not the host's.
	initPID := r.initPID(ctx, x)
	if !inContainerCgroup(initPID, x.id) {
		r.procWarnOnce.Do(func() {
			logger.Info("Warning: a container's processes are not visible in this /proc, so a timed-out exec "+
				"probe's children cannot be killed, only the command itself; run probed with hostPID "+
				"(unless the container was just exiting). Logged once.",
				"containerID", x.containerID, "initPID", initPID)
		})
		return 0
	}
	list := func(ctx context.Context) ([]int, error) {
		infos, err := x.task.Pids(ctx)
		if err != nil {
			return nil, err
		}
		pids := make([]int, 0, len(infos))
		for _, p := range infos {
			pids = append(pids, int(p.Pid))
		}
		return pids, nil
	}
	owned := func(pid int) bool { return inContainerCgroup(pid, x.id) }
	n, err := killProcessTree(ctx, root, list, owned)
	if err != nil {
		logger.Error(err, "Killing a timed-out exec's processes", "containerID", x.containerID, "pid", root)
	}
	return n
}

// initPID asks containerd for the task's init PID: x.task may come from the
// cache, and a task recreated since has another. A changed PID drops the
// cache entry.
func (r *Containerd) initPID(ctx context.Context, x *execution) int {
	pid := x.task.Pid()
	resp, err := r.client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: x.id})
	if err != nil || resp.Process == nil {
		return int(pid)
	}
	if resp.Process.Pid != pid {
		r.targets.drop(x.id, nil)
	}
	return int(resp.Process.Pid)
}
