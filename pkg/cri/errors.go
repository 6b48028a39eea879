package cri

import (
	"errors"
	"fmt"
	"time"
)

// Errors callers can test with errors.Is. Every error from a Runtime names the
// container it was about.
var (
	// ErrInvalidContainerID: the ID is not "<runtime>://<id>" or the ID is malformed.
	ErrInvalidContainerID = errors.New("invalid container ID")
	// ErrUnsupportedRuntime: a runtime type probed does not handle (docker://),
	// or one this Runtime cannot serve (cri-o:// on the containerd client).
	ErrUnsupportedRuntime = errors.New("unsupported container runtime")
	// ErrContainerNotFound: the runtime does not know the container.
	ErrContainerNotFound = errors.New("container not found")
	// ErrContainerNotRunning: the container exists but is not running.
	ErrContainerNotRunning = errors.New("container is not running")
	// ErrEmptyCommand: ExecInContainer was given no command.
	ErrEmptyCommand = errors.New("empty command")
)

// TimeoutError is returned when a command runs out of its timeout in the
// runtime. By then the command and the processes it started have been killed
// (see each Runtime for how far).
type TimeoutError struct {
	ContainerID string
	After       time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("exec in container %s: command timed out after %v", e.ContainerID, e.After)
}

// Timeout marks the error as a timeout for prober.CommandRunner's callers.
func (e *TimeoutError) Timeout() bool { return true }

// IsTimeout reports whether err, or one it wraps, says Timeout() == true.
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// SlotTimeoutError is returned when no exec slot (--max-concurrent-execs,
// --max-concurrent-execs-per-pod) freed up within the probe's timeout. The command never ran: this is
// probed's own limit, not the container's failure, so it is not a timeout
// (Timeout() is absent) but a throttle, which the prober turns into a
// discarded result.
type SlotTimeoutError struct {
	ContainerID string
	Waited      time.Duration
}

func (e *SlotTimeoutError) Error() string {
	return fmt.Sprintf("exec in container %s: no exec slot free within %v (--max-concurrent-execs, --max-concurrent-execs-per-pod); the command did not run", e.ContainerID, e.Waited)
}

// Throttled marks the error as probed's own limit for the prober.
func (e *SlotTimeoutError) Throttled() bool { return true }

// ErrNoSandboxIPs: the runtime cannot say which IPs a pod's sandbox has
// (--runtime-type=none).
var ErrNoSandboxIPs = errors.New("no container runtime to say which IPs the pod's sandbox has")
