package execout

import (
	"context"
	"testing"
	"time"
)

// A reservation is at most the whole budget, and giving it back twice
// gives it back once.
func TestOutputBudgetReserve(t *testing.T) {
	b := NewBudget(100)
	release, err := b.Reserve(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Reserve(ctx, 1); err == nil {
		t.Fatal("reserved beyond the budget")
	}
	release()
	release()
	a, err := b.Reserve(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	defer a()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := b.Reserve(ctx2, 41); err == nil {
		t.Fatal("a second release gave the budget back twice")
	}
}
