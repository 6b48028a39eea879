// Package execout holds what the runtime implementations share about an
// exec's output: the node's output budget and the kubelet's 10 KiB cut.
package execout

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/probed-dev/probed/pkg/cri"

	"golang.org/x/sync/semaphore"
)

// What one exec's output may cost probed's memory, reserved from the Budget.
const (
	// CRIAnswerCost is what reading one ExecSync answer may cost: the
	// message as it arrives, grpc-go's contiguous copy for the decoder, the
	// decoded stdout and stderr, and the combined output.
	CRIAnswerCost = 3*cri.MaxExecAnswerBytes + cri.MaxOutputBytes
	// NativeExecCost is what one exec through the native client holds for
	// its whole run: containerd's copy buffer for each of its two pipes
	// (32 KiB each), the two capped buffers and the combined output, with
	// room for append's growth.
	NativeExecCost = 128 << 10
)

// Budget is the node's budget of exec output bytes in probed's
// memory. An exec reserves what it may hold at most before it holds it,
// and waits, first come first served, while the budget is spent; so
// however many pods print however much, exec output never holds more than
// the budget. Through CRI the reservation is made once the runtime starts
// to answer (a hung command holds none); through the native client, for
// the exec's whole run, whose copy buffers it holds throughout.
type Budget struct {
	size    int64
	sem     *semaphore.Weighted
	waiting atomic.Int32 // reservations waiting now
}

// Size is the budget in bytes.
func (b *Budget) Size() int64 { return b.size }

// Waiting is how many reservations wait now.
func (b *Budget) Waiting() int32 { return b.waiting.Load() }

// NewBudget returns a budget of size bytes; cri.DefaultExecOutputBudget
// when size <= 0.
func NewBudget(size int64) *Budget {
	if size <= 0 {
		size = cri.DefaultExecOutputBudget
	}
	return &Budget{size: size, sem: semaphore.NewWeighted(size)}
}

// Reserve waits for n bytes of the budget (at most all of it) until ctx
// ends, and returns what gives them back; calling it again does nothing.
func (b *Budget) Reserve(ctx context.Context, n int64) (func(), error) {
	n = min(n, b.size)
	b.waiting.Add(1)
	err := b.sem.Acquire(ctx, n)
	b.waiting.Add(-1)
	if err != nil {
		return nil, err
	}
	return sync.OnceFunc(func() { b.sem.Release(n) }), nil
}
