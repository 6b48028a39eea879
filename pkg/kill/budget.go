package kill

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// shareWindow is how long a namespace that asked for a restart keeps its
// share of the budget: long enough to cover a deferred kill's retry at a
// long probe period, and the same as the deferral episodes' gap.
const shareWindow = episodeGap

// Budget is the node's budget of container restarts
// (--liveness-restart-budget), a token bucket of perMinute restarts a
// minute that starts full and refills continuously: a burst of perMinute
// passes at once, then one every 60s/perMinute.
//
// Under it, each namespace that asked for a restart within the last
// shareWindow has a bucket of its own, its fair share: the node's rate and
// burst split evenly between those namespaces (at least one restart of
// burst). A restart needs a token from both, so one namespace's crash
// loops take no more than their share, and the node's bucket refills for
// the others at least at their shares' rate: a namespace that asks while
// the node's budget is spent by another waits no longer than its own share
// takes to refill one token (60 s × namespaces / budget). A namespace
// alone on the node has the whole budget.
//
// A nil *Budget is unlimited. It is safe for concurrent use.
type Budget struct {
	clock     clock.PassiveClock
	perMinute int

	mu     sync.Mutex
	last   time.Time // the latest time seen; an earlier clock reading counts as this
	node   *rate.Limiter
	shares map[string]*share
}

// share is one namespace's bucket, and when it last asked.
type share struct {
	lim   *rate.Limiter
	asked time.Time
}

// Verdict is the budget's answer to one restart.
type Verdict struct {
	// OK: a token was taken; the restart may go ahead.
	OK bool
	// ShareSpent: refused because the namespace's share was spent (else, if
	// not OK, the node's budget was).
	ShareSpent bool
	// Namespaces is how many namespaces share the budget now, and Share
	// each one's restarts per minute.
	Namespaces int
	Share      float64
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
	return &Budget{
		clock:     clk,
		perMinute: perMinute,
		last:      clk.Now(),
		node:      rate.NewLimiter(perMinuteLimit(float64(perMinute)), perMinute),
		shares:    map[string]*share{},
	}
}

// PerMinute is the budget's rate; 0 for an unlimited (nil) budget.
func (b *Budget) PerMinute() int {
	if b == nil {
		return 0
	}
	return b.perMinute
}

// Take spends one restart of namespace's share and of the node's budget if
// both have one, and says whether it did.
func (b *Budget) Take(namespace string) Verdict {
	if b == nil {
		return Verdict{OK: true}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.nowLocked()
	s := b.askLocked(namespace, now)
	v := Verdict{Namespaces: len(b.shares), Share: b.shareRate()}
	// The share's token first, given back if the node has none. A
	// namespace alone has the whole budget: only the node's bucket decides
	// (its share still counts what it takes, for when another comes).
	r := s.lim.ReserveN(now, 1)
	took := r.DelayFrom(now) == 0
	if !took {
		r.CancelAt(now)
		if v.Namespaces > 1 {
			v.ShareSpent = true
			return v
		}
	}
	if !b.node.AllowN(now, 1) {
		if took {
			r.CancelAt(now)
		}
		return v
	}
	v.OK = true
	return v
}

// Available is how many whole restarts the node's budget could pass now.
func (b *Budget) Available() int {
	if b == nil {
		return -1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// A hair of slack for float rounding: six seconds at 10/min is one token.
	return int(b.node.TokensAt(b.nowLocked()) + 1e-9)
}

// nowLocked is the clock's time, never earlier than one seen before: a
// clock stepping back must not mint tokens when it steps forward again.
func (b *Budget) nowLocked() time.Time {
	if now := b.clock.Now(); now.After(b.last) {
		b.last = now
	}
	return b.last
}

// askLocked notes that namespace asks at now, forgets the namespaces that
// have not asked for shareWindow, and re-splits the budget when the
// number of namespaces changed.
func (b *Budget) askLocked(namespace string, now time.Time) *share {
	n := len(b.shares)
	for ns, s := range b.shares {
		if now.Sub(s.asked) > shareWindow {
			delete(b.shares, ns)
		}
	}
	s := b.shares[namespace]
	if s == nil {
		s = &share{}
		b.shares[namespace] = s
	}
	s.asked = now
	if len(b.shares) != n || s.lim == nil {
		limit, burst := perMinuteLimit(b.shareRate()), b.shareBurst()
		for _, o := range b.shares {
			if o.lim == nil {
				// Starts full: a namespace's first restarts are not held
				// back by what others did before it.
				o.lim = rate.NewLimiter(limit, burst)
				continue
			}
			o.lim.SetLimitAt(now, limit)
			o.lim.SetBurstAt(now, burst)
		}
	}
	return s
}

// shareRate is each namespace's restarts per minute.
func (b *Budget) shareRate() float64 {
	return float64(b.perMinute) / float64(max(len(b.shares), 1))
}

// shareBurst is each namespace's burst: its share of the node's, at least 1.
func (b *Budget) shareBurst() int {
	return max(b.perMinute/max(len(b.shares), 1), 1)
}

func perMinuteLimit(n float64) rate.Limit { return rate.Limit(n / 60) }
