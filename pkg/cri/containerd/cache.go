package containerd

import (
	"context"
	"fmt"
	"sync"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/probed-dev/probed/pkg/cri"
)

// execTarget is what every exec into one container needs from containerd:
// its task and its process spec. Loading them costs three RPCs and a JSON
// decode of the whole OCI spec, so they are kept per container ID; an exec
// then only makes the exec's own calls.
type execTarget struct {
	task containerd.Task
	// proc is the container's process spec; never modified.
	proc *specs.Process
}

// targetCache maps container IDs to their execTarget. A container ID is
// one container instance (a restart gets a new ID), and its spec does not
// change, so entries go stale only when the task does: an exec that
// cannot find it drops the entry (see startExec), as does a timed-out exec
// that sees another init PID (see killTree). Entries of deleted containers
// are dropped by a full cache starting afresh.
type targetCache struct {
	mu sync.Mutex
	m  map[string]*execTarget
}

// targetCacheMax is far above the containers of one node.
const targetCacheMax = 4096

func (c *targetCache) get(id string) *execTarget {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
}

func (c *targetCache) put(id string, t *execTarget) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= targetCacheMax {
		c.m = make(map[string]*execTarget)
	}
	c.m[id] = t
}

// drop forgets id's entry if it is still t (nil: whatever it is).
func (c *targetCache) drop(id string, t *execTarget) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.m[id]; ok && (t == nil || cur == t) {
		delete(c.m, id)
	}
}

// execTarget returns id's task and process spec, from the cache if there;
// cached says which.
func (r *Containerd) execTarget(ctx context.Context, containerID, id string) (t *execTarget, cached bool, err error) {
	if t := r.targets.get(id); t != nil {
		return t, true, nil
	}
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, false, fmt.Errorf("exec in container %s: %w", containerID, cri.ErrContainerNotFound)
		}
		return nil, false, fmt.Errorf("exec in container %s: load container: %w", containerID, err)
	}
	task, err := runningTask(ctx, c)
	if err != nil {
		return nil, false, fmt.Errorf("exec in container %s: %w", containerID, err)
	}
	spec, err := loadedSpec(ctx, c)
	if err != nil {
		return nil, false, fmt.Errorf("exec in container %s: read spec: %w", containerID, err)
	}
	if spec.Process == nil {
		return nil, false, fmt.Errorf("exec in container %s: spec has no process", containerID)
	}
	t = &execTarget{task: task, proc: spec.Process}
	r.targets.put(id, t)
	return t, false, nil
}
