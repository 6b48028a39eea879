package containerd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/internal/execout"
)

// The native client reserves its exec's buffers before it starts the exec:
// with the node's budget spent until the timeout, the command never runs
// and the exec says why, as probed's own limit.
func TestNativeExecWaitsForTheOutputBudget(t *testing.T) {
	r := &Containerd{budget: execout.NewBudget(execout.NativeExecCost)}
	hold, err := r.budget.Reserve(context.Background(), execout.NativeExecCost)
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	// No client: reaching containerd would panic.
	_, _, err = r.ExecInContainer(context.Background(), "containerd://abc", []string{"true"}, 50*time.Millisecond)
	var be *cri.OutputBudgetError
	if !errors.As(err, &be) || be.Ran || !be.Throttled() {
		t.Fatalf("got %v; want an OutputBudgetError for a command that never ran", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err = r.ExecInContainer(ctx, "containerd://abc", []string{"true"}, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("with the caller gone: %v; want its context's error", err)
	}
}
