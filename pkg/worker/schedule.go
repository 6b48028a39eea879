package worker

import (
	"time"

	"k8s.io/utils/clock"
)

// schedule is a ticker that can be reset, built on one clock.Timer.
//
// It keeps time.Ticker's semantics: ticks fall on a fixed grid of periods, at
// most one missed tick is delivered late, the others are dropped. Unlike
// clock.Ticker it can be reset (a manual run restarts the grid, as
// probeTicker.Reset does in the kubelet) and it knows when each tick was due,
// which is what probed_probe_lateness_seconds measures. A fake clock's Timer
// also stops cleanly, which keeps tests free of stray waiters.
type schedule struct {
	clock  clock.Clock
	period time.Duration
	next   time.Time // the grid point the armed timer stands for
	timer  clock.Timer
}

func newSchedule(c clock.Clock, period time.Duration) *schedule {
	s := &schedule{clock: c, period: period, next: c.Now().Add(period)}
	s.timer = c.NewTimer(period)
	return s
}

// C delivers a value when the next tick is due.
func (s *schedule) C() <-chan time.Time { return s.timer.C() }

// fired must be called after each receive from C. It returns the time the
// tick was due and arms the timer for the first grid point after now.
func (s *schedule) fired() (due time.Time) {
	due = s.next
	now := s.clock.Now()
	s.next = s.next.Add(s.period)
	for !s.next.After(now) {
		s.next = s.next.Add(s.period)
	}
	s.timer.Reset(s.next.Sub(now))
	return due
}

// reset restarts the grid one period from now, dropping a pending tick.
func (s *schedule) reset() {
	s.timer.Stop()
	select {
	case <-s.timer.C():
	default:
	}
	s.next = s.clock.Now().Add(s.period)
	s.timer.Reset(s.period)
}

func (s *schedule) stop() { s.timer.Stop() }
