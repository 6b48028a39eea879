// Package cri is the container runtime's interface: Runtime, the Owner a
// call is for, the runtime's errors and limits, container IDs and Options.
// It links no runtime client, so that the prober, the worker and the kill
// path import it cheaply. The rest of the tree:
//
//   - connect: New opens the runtime Options select (or detect);
//   - containerd, runtimeservice, none: the implementations (containerd's
//     native client and containerd-cri; CRI's RuntimeService; no runtime);
//   - decorator: what wraps an implementation in cmd/probed, innermost
//     first: Verified (only the caller's own container), Limited (the
//     node's exec slots, shared fairly), and Health (/readyz);
//   - internal: what the implementations share (the gRPC dial, the exec
//     output budget) and the tests' fakes.
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

// RuntimeName is the metrics label for rt: its Name() if it has one.
func RuntimeName(rt Runtime) string {
	if n, ok := rt.(interface{ Name() string }); ok {
		return n.Name()
	}
	return "unknown"
}
