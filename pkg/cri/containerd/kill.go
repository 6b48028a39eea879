package containerd

import (
	"context"

	"github.com/containerd/containerd/api/services/tasks/v1"
	containerd "github.com/containerd/containerd/v2/client"
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
	if !r.procVisible(ctx, x.containerID, x.id, x.task) {
		return 0
	}
	n, err := killProcessTree(ctx, root, taskPids(x.task), inCgroupOf(x.id))
	if err != nil {
		logger.Error(err, "Killing a timed-out exec's processes", "containerID", x.containerID, "pid", root)
	}
	return n
}

// procVisible reports whether this /proc shows the container's processes:
// its init is alive and in the cgroup for as long as the container runs, so
// if this /proc does not show it there, it is not the host's. It warns once.
func (r *Containerd) procVisible(ctx context.Context, containerID, id string, task containerd.Task) bool {
	initPID := r.initPID(ctx, id, task)
	if inContainerCgroup(initPID, id) {
		return true
	}
	r.procWarnOnce.Do(func() {
		klog.FromContext(ctx).Info("Warning: a container's processes are not visible in this /proc, so a timed-out exec "+
			"probe's children cannot be killed, only the command itself; run probed with hostPID "+
			"(unless the container was just exiting). Logged once.",
			"containerID", containerID, "initPID", initPID)
	})
	return false
}

// inCgroupOf is the ownership check for container id's processes: only a
// PID that /proc places in its cgroup is ever signalled.
func inCgroupOf(id string) func(pid int) bool {
	return func(pid int) bool { return inContainerCgroup(pid, id) }
}

// taskPids lists the PIDs in the task's cgroup as the shim sees them (host PIDs).
func taskPids(task containerd.Task) func(context.Context) ([]int, error) {
	return func(ctx context.Context) ([]int, error) {
		infos, err := task.Pids(ctx)
		if err != nil {
			return nil, err
		}
		pids := make([]int, 0, len(infos))
		for _, p := range infos {
			pids = append(pids, int(p.Pid))
		}
		return pids, nil
	}
}

// initPID asks containerd for the task's init PID: task may come from the
// cache, and a task recreated since has another. A changed PID drops the
// cache entry.
func (r *Containerd) initPID(ctx context.Context, id string, task containerd.Task) int {
	pid := task.Pid()
	resp, err := r.client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: id})
	if err != nil || resp.Process == nil {
		return int(pid)
	}
	if resp.Process.Pid != pid {
		r.targets.drop(id, nil)
	}
	return int(resp.Process.Pid)
}
