package prober

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// errNoRunner is returned for exec probes when the Prober has no CommandRunner.
var errNoRunner = errors.New("exec probe: no command runner configured")

// execProbe runs an exec probe through the container runtime. The verdict
// follows the kubelet: exit 0 is Success and non-zero a Failure, both with
// the command's output; a timeout is a Failure with the kubelet's message;
// anything else means the probe could not run at all, so it is Unknown and
// an error (which the caller retries).
func execProbe(ctx context.Context, runner CommandRunner, action *v1.ExecAction, target Target, timeout time.Duration) (Result, string, error) {
	if runner == nil {
		return Unknown, "", errNoRunner
	}
	cmd := expandCommand(action.Command, target.Env)
	out, exitCode, err := runner.ExecInContainer(ctx, target.ContainerID, cmd, timeout)
	// The runner promises a cap; enforce it anyway, since it bounds memory
	// held per worker and the size of events.
	if len(out) > MaxOutputBytes {
		out = out[:MaxOutputBytes]
	}
	if err != nil {
		if isThrottled(err) {
			// probed's own exec cap: the command never ran.
			return Unknown, "", err
		}
		if isTimeout(err) {
			// The kubelet's text (1.33 to 1.37), from the CRI client's ErrCommandTimedOut.
			return Failure, fmt.Sprintf("command timed out: %q timed out after %s", strings.Join(cmd, " "), timeout), nil
		}
		klog.V(4).InfoS("Exec probe could not run", "containerID", target.ContainerID, "err", err)
		return Unknown, "", err
	}
	if v := klog.V(4); v.Enabled() {
		v.InfoS("Exec probe ran", "containerID", target.ContainerID, "exitCode", exitCode, "output", string(out))
	}
	if exitCode != 0 {
		return Failure, string(out), nil
	}
	return Success, string(out), nil
}

// isTimeout reports whether err, or an error it wraps, says it is a timeout.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// isThrottled reports whether err says the probe was held back by probed's
// own limits (the per-node exec cap), so that it says nothing about the
// container: it is not retried, raises no event, and the worker discards it.
func isThrottled(err error) bool {
	var t interface{ Throttled() bool }
	return errors.As(err, &t) && t.Throttled()
}

// isOwnerMismatch reports whether err says the runtime refused the exec
// because the container is not the probed pod's (cri.OwnerMismatchError).
func isOwnerMismatch(err error) bool {
	var m interface{ OwnerMismatch() bool }
	return errors.As(err, &m) && m.OwnerMismatch()
}
