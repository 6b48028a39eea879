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

// TimeoutError is returned when an exec runs out of its timeout, either in the
// runtime or while queued for an exec slot. By then the command and the
// processes it started have been killed (see each Runtime for how far).
type TimeoutError struct {
	ContainerID string
	After       time.Duration
	// Queued is true when the time ran out before the command started.
	Queued bool
}

func (e *TimeoutError) Error() string {
	if e.Queued {
		return fmt.Sprintf("exec in container %s: timed out after %v waiting for an exec slot", e.ContainerID, e.After)
	}
	return fmt.Sprintf("exec in container %s: command timed out after %v", e.ContainerID, e.After)
}

// Timeout marks the error as a timeout for prober.CommandRunner's callers.
func (e *TimeoutError) Timeout() bool { return true }

// IsTimeout reports whether err, or one it wraps, says Timeout() == true.
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
