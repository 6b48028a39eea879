package cri

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
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
	// native client. An exec that would go over it waits (see outputBudget).
	DefaultExecOutputBudget = 32 << 20

	// criAnswerCost is what reading one ExecSync answer may cost: the
	// message as it arrives, grpc-go's contiguous copy for the decoder, the
	// decoded stdout and stderr, and the combined output.
	criAnswerCost = 3*MaxExecAnswerBytes + MaxOutputBytes
	// nativeExecCost is what one exec through the native client holds for
	// its whole run: containerd's copy buffer for each of its two pipes
	// (32 KiB each), the two capped buffers and the combined output, with
	// room for append's growth.
	nativeExecCost = 128 << 10
)

// outputBudget is the node's budget of exec output bytes in probed's
// memory. An exec reserves what it may hold at most before it holds it,
// and waits, first come first served, while the budget is spent; so
// however many pods print however much, exec output never holds more than
// the budget. Through CRI the reservation is made once the runtime starts
// to answer (a hung command holds none); through the native client, for
// the exec's whole run, whose copy buffers it holds throughout.
type outputBudget struct {
	size    int64
	sem     *semaphore.Weighted
	waiting atomic.Int32 // reservations waiting now
}

func newOutputBudget(size int64) *outputBudget {
	if size <= 0 {
		size = DefaultExecOutputBudget
	}
	return &outputBudget{size: size, sem: semaphore.NewWeighted(size)}
}

// reserve waits for n bytes of the budget (at most all of it) until ctx
// ends, and returns what gives them back; calling it again does nothing.
func (b *outputBudget) reserve(ctx context.Context, n int64) (func(), error) {
	n = min(n, b.size)
	b.waiting.Add(1)
	err := b.sem.Acquire(ctx, n)
	b.waiting.Add(-1)
	if err != nil {
		return nil, err
	}
	return sync.OnceFunc(func() { b.sem.Release(n) }), nil
}

// OutputBudgetError is returned when the node's budget for exec output
// (outputBudget) stayed spent until the exec's deadline. Like a
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
