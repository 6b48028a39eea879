// Package cri is the only package that talks to the container runtime.
package cri

import (
	"context"
	"time"
)

// Runtime runs probe commands in containers and stops containers.
// Container IDs are runtime-qualified ("containerd://<id>", "cri-o://<id>")
// as found in pod container statuses.
type Runtime interface {
	// ExecInContainer runs cmd in the container with the container's own process
	// spec. It returns combined output capped at 10 KiB and the exit code. On
	// timeout the command and its children are killed and the error has
	// Timeout() == true. It satisfies prober.CommandRunner.
	ExecInContainer(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (output []byte, exitCode int, err error)
	// StopContainer sends the container's stop signal, then SIGKILL after grace.
	StopContainer(ctx context.Context, containerID string, grace time.Duration) error
	// Ready reports whether the runtime answers, for /readyz.
	Ready(ctx context.Context) error
	Close() error
}
