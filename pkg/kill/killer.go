package kill

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Killer stops a container that failed its liveness or startup probe. The
// worker calls it from its own goroutine while it is on hold, so it may
// block for the grace period (the preStop hook, then the stop). An error
// is logged and counted, and the kill is retried on the next tick while
// the same container instance still runs; a *DeferredError with Reprobe
// set asks the worker to probe the container afresh instead.
//
// RuntimeKiller is the Killer at the end of the chain, Guard the one in
// front of it.
type Killer interface {
	Kill(ctx context.Context, pod *v1.Pod, container *v1.Container, containerID string, probeType probespec.ProbeType, spec *v1.Probe) error
}

// Recorder emits an Event about one container of a pod (the worker's
// Recorder).
type Recorder interface {
	Event(pod *v1.Pod, containerName string, eventType, reason, message string)
}

// Stopper stops a container through the runtime; cri.Runtime satisfies it.
type Stopper interface {
	StopContainer(ctx context.Context, containerID string, grace time.Duration) error
}

// OwnerChecker is a Stopper that can tell, before a kill, whether the
// container is the caller's (the runtime's Limited and Verified decorators).
type OwnerChecker interface {
	CheckOwner(ctx context.Context, containerID string) error
}

// HookRunner runs one lifecycle hook of a container and returns when it has
// finished, failed, or ctx has ended. A non-nil error is a failure whose
// text is the kubelet's message. *lifecycle.Runner satisfies it.
type HookRunner interface {
	Run(ctx context.Context, pod *v1.Pod, container *v1.Container, containerID string, handler *v1.LifecycleHandler) error
}

// DeferredError is what Guard returns for a kill it held back on purpose.
// The worker treats it as a failed kill: it stays on hold and asks again on
// its next period while the container still runs, unless Reprobe is set.
type DeferredError struct {
	// Reason is DeferBudget or DeferWorkloadGuard.
	Reason string
	// Message says why, as the event does.
	Message string
	// Reprobe: the kill is cancelled rather than merely delayed; the worker
	// starts the probe over, so that the container is only restarted if it
	// still fails once the pause is over (the workload guard). Without it
	// the worker simply retries the same kill.
	Reprobe bool
}

func (e *DeferredError) Error() string { return "restart deferred: " + e.Message }

// Deferred marks a designed pause for the worker, which counts it under its
// own outcome rather than as a failed kill.
func (e *DeferredError) Deferred() bool { return true }

// AsDeferred returns err's *DeferredError, if it is one.
func AsDeferred(err error) (*DeferredError, bool) {
	var d *DeferredError
	ok := errors.As(err, &d)
	return d, ok
}
