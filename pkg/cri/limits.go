package cri

import (
	"fmt"
	"time"
)

// What a tenant's exec output may cost probed's memory.
const (
	// MaxExecAnswerBytes is the largest ExecSync answer (stdout and stderr
	// as the runtime sends them, before the cut to MaxOutputBytes) probed
	// reads over CRI. A larger answer fails the exec with an error naming
	// this limit, as one over 16 MiB fails under the kubelet, whose CRI
	// client accepts up to 16 MiB. The native client never needs it: it
	// reads the output as it comes and keeps MaxOutputBytes.
	MaxExecAnswerBytes = 1 << 20
	// DefaultExecOutputBudget is the node-wide budget of bytes that exec
	// output may hold in probed's memory at once: about ten CRI answers of
	// MaxExecAnswerBytes being read, or 256 execs in flight through the
	// native client. An exec that would go over it waits (see execout.Budget).
	DefaultExecOutputBudget = 32 << 20
)

// MaxOutputBytes caps what an exec returns: stdout then stderr, as the kubelet
// joins them, cut at the kubelet's 10 KiB.
const MaxOutputBytes = 10 * 1024

// OutputBudgetError is returned when the node's budget for exec output
// (execout.Budget) stayed spent until the exec's deadline. Like a
// SlotTimeoutError, it is probed's own limit, not the container's
// failure: the prober discards the result.
type OutputBudgetError struct {
	ContainerID string
	Budget      int64
	// Ran says the command ran and its answer went unread; otherwise it
	// never started.
	Ran bool
}

func (e *OutputBudgetError) Error() string {
	what := "the command did not run"
	if e.Ran {
		what = "the command's answer was not read"
	}
	return fmt.Sprintf("exec in container %s: the node's budget for exec output in probed's memory (%d MiB) stayed spent until the deadline; %s",
		e.ContainerID, e.Budget>>20, what)
}

// Throttled marks the error as probed's own limit for the prober.
func (e *OutputBudgetError) Throttled() bool { return true }

// KillWaitTimeout bounds the wait for exit after SIGKILL, as the kubelet's CRI
// client bounds StopContainer (its default 2 minute runtime request timeout).
const KillWaitTimeout = 2 * time.Minute
