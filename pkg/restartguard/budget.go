package restartguard

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Budget is a token bucket of container restarts, shared by every worker on
// the node (--liveness-restart-budget). It holds at most perMinute tokens,
// starts full, and gains perMinute tokens a minute, continuously: a burst
// of perMinute restarts passes at once, then one every 60s/perMinute.
//
// A nil *Budget is unlimited. It is safe for concurrent use.
type Budget struct {
	clock     clock.PassiveClock
	perMinute int

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewBudget returns a budget of perMinute restarts a minute; nil (unlimited)
// when perMinute is 0 or less. clk defaults to the real clock.
func NewBudget(perMinute int, clk clock.PassiveClock) *Budget {
	if perMinute <= 0 {
		return nil
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Budget{clock: clk, perMinute: perMinute, tokens: float64(perMinute), last: clk.Now()}
}

// PerMinute is the budget's rate; 0 for an unlimited (nil) budget.
func (b *Budget) PerMinute() int {
	if b == nil {
		return 0
	}
	return b.perMinute
}

// Take spends one restart if one is available and reports whether it did.
func (b *Budget) Take() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	// A hair of slack for float rounding: six seconds at 10/min is one token.
	if b.tokens < 1-1e-9 {
		return false
	}
	b.tokens--
	if b.tokens < 0 {
		b.tokens = 0
	}
	return true
}

// Available is how many whole restarts could be taken now.
func (b *Budget) Available() int {
	if b == nil {
		return -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	return int(b.tokens + 1e-9)
}

func (b *Budget) refillLocked() {
	now := b.clock.Now()
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens += elapsed.Seconds() * float64(b.perMinute) / 60
		if max := float64(b.perMinute); b.tokens > max {
			b.tokens = max
		}
	}
	b.last = now
}
