package cri

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The native client reserves its exec's buffers before it starts the exec:
// with the node's budget spent until the timeout, the command never runs
// and the exec says why, as probed's own limit.
func TestNativeExecWaitsForTheOutputBudget(t *testing.T) {
	r := &Containerd{budget: newOutputBudget(nativeExecCost)}
	hold, err := r.budget.reserve(context.Background(), nativeExecCost)
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	// No client: reaching containerd would panic.
	_, _, err = r.ExecInContainer(context.Background(), "containerd://abc", []string{"true"}, 50*time.Millisecond)
	var be *OutputBudgetError
	if !errors.As(err, &be) || be.Ran || !isThrottled(err) || execOutcome(-1, err) != OutcomeQueueTimeout {
		t.Fatalf("got %v; want an OutputBudgetError for a command that never ran", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err = r.ExecInContainer(ctx, "containerd://abc", []string{"true"}, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("with the caller gone: %v; want its context's error", err)
	}
}

// A reservation is at most the whole budget, and giving it back twice
// gives it back once.
func TestOutputBudgetReserve(t *testing.T) {
	b := newOutputBudget(100)
	release, err := b.reserve(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.reserve(ctx, 1); err == nil {
		t.Fatal("reserved beyond the budget")
	}
	release()
	release()
	a, err := b.reserve(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	defer a()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := b.reserve(ctx2, 41); err == nil {
		t.Fatal("a second release gave the budget back twice")
	}
}
