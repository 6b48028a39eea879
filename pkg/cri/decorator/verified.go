package decorator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"golang.org/x/sync/singleflight"
	"k8s.io/klog/v2"
)

// Verified wraps a Runtime so that it execs into and stops only the
// container its caller serves. Before any exec or stop it reads the
// container's kubelet labels, and its sandbox's, from the runtime, and
// compares them with the Owner in the call's context (WithOwner); a call
// for another pod's or another container's ID, or one with no Owner, is
// refused with an *OwnerMismatchError (or ErrNoOwner), logged and counted,
// and never reaches the runtime.
//
// What the runtime says of an ID never changes (an ID is one container
// instance, and its labels are fixed at creation), so it is kept per ID:
// the first call for a container costs one or two runtime calls, later
// ones none.
type Verified struct {
	rt     cri.Runtime
	lookup cri.OwnerLookup
	m      *Metrics
	owners ownerCache
	group  singleflight.Group
}

var _ cri.Runtime = (*Verified)(nil)

// NewVerified wraps rt, which must be one of this package's runtimes. m may be nil.
func NewVerified(rt cri.Runtime, m *Metrics) (*Verified, error) {
	lookup, ok := rt.(cri.OwnerLookup)
	if !ok {
		return nil, fmt.Errorf("runtime %s cannot say whose a container is", cri.RuntimeName(rt))
	}
	return &Verified{rt: rt, lookup: lookup, m: m}, nil
}

// Name is the wrapped runtime's name.
func (v *Verified) Name() string { return cri.RuntimeName(v.rt) }

// ExecInContainer runs cmd if the container is the caller's.
func (v *Verified) ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	if err := v.check(ctx, containerID, opExec); err != nil {
		return nil, -1, err
	}
	return v.rt.ExecInContainer(ctx, containerID, cmd, timeout)
}

// StopContainer stops the container if it is the caller's.
func (v *Verified) StopContainer(ctx context.Context, containerID string, grace time.Duration) error {
	if err := v.check(ctx, containerID, opStop); err != nil {
		return err
	}
	return v.rt.StopContainer(ctx, containerID, grace)
}

// CheckOwner says whether the container is the caller's, as a stop would,
// without stopping it: a kill checks first, before its Killing event and
// preStop hook.
func (v *Verified) CheckOwner(ctx context.Context, containerID string) error {
	return v.check(ctx, containerID, opStop)
}

// CheckExec says whether the container is the caller's, as an exec would,
// without running anything: a caller that joins another's identical run
// (--exec-share-runs) gets its output without an exec of its own.
func (v *Verified) CheckExec(ctx context.Context, containerID string) error {
	return v.check(ctx, containerID, opExec)
}

// Ready passes through.
func (v *Verified) Ready(ctx context.Context) error { return v.rt.Ready(ctx) }

// Close closes the wrapped runtime.
func (v *Verified) Close() error { return v.rt.Close() }

func (v *Verified) check(ctx context.Context, containerID, op string) error {
	want, ok := cri.OwnerFrom(ctx)
	if !ok {
		v.m.observeOwnerRefusal(op)
		klog.FromContext(ctx).Error(cri.ErrNoOwner, "Refusing a runtime call with no owner", "containerID", containerID, "op", op)
		return fmt.Errorf("%s container %s: %w", op, containerID, cri.ErrNoOwner)
	}
	got, err := v.owner(ctx, containerID)
	if err != nil {
		return err
	}
	if got.Matches(want) {
		return nil
	}
	v.m.observeOwnerRefusal(op)
	klog.FromContext(ctx).Info("Warning: refusing to reach a container that is not the probed pod's: its ID in the pod's status points elsewhere",
		"op", op, "containerID", containerID, "pod", want.PodNamespace+"/"+want.PodName, "podUID", want.PodUID,
		"containerName", want.Container, "runtimeSays", got.Describe())
	return &cri.OwnerMismatchError{ContainerID: containerID, Want: want, Op: op}
}

// owner is what the runtime says of containerID, from the cache or asked
// once however many callers ask together.
func (v *Verified) owner(ctx context.Context, containerID string) (cri.RuntimeOwner, error) {
	if o, ok := v.owners.get(containerID); ok {
		return o, nil
	}
	ch := v.group.DoChan(containerID, func() (any, error) {
		// Not the first caller's context: its end must not fail the others.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ownerLookupTimeout)
		defer cancel()
		o, err := v.lookup.ContainerOwner(lctx, containerID)
		if err == nil {
			v.owners.put(containerID, o)
		}
		return o, err
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return cri.RuntimeOwner{}, r.Err
		}
		return r.Val.(cri.RuntimeOwner), nil
	case <-ctx.Done():
		return cri.RuntimeOwner{}, fmt.Errorf("container %s: reading its owner from the runtime: %w", containerID, ctx.Err())
	}
}

// What a refused call would have done: words for its error, and its metric label.
const (
	opExec = "exec into"
	opStop = "stop"
)

// ownerLookupTimeout bounds the runtime calls that read a container's labels.
const ownerLookupTimeout = 10 * time.Second

// ownerCache maps container IDs to what the runtime says of them. It
// starts afresh when full, which only costs the next call per container a
// lookup.
type ownerCache struct {
	mu sync.Mutex
	m  map[string]cri.RuntimeOwner
}

// ownerCacheMax is far above the containers of one node.
const ownerCacheMax = 4096

func (c *ownerCache) get(id string) (cri.RuntimeOwner, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.m[id]
	return o, ok
}

func (c *ownerCache) put(id string, o cri.RuntimeOwner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= ownerCacheMax {
		c.m = make(map[string]cri.RuntimeOwner)
	}
	c.m[id] = o
}
