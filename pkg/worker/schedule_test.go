package worker

import (
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// schedWorker is a bare worker for scheduler tests: only what the scheduler
// touches.
func schedWorker() *Worker { return &Worker{wake: make(chan struct{}, 1)} }

// tick waits for w's next wake-up and returns its tick's due time.
func tick(t *testing.T, w *Worker) time.Duration {
	t.Helper()
	recv(t, w.wake, "tick")
	due := w.pending.Swap(0)
	if due == 0 {
		t.Fatal("woken without a tick")
	}
	return time.Duration(due - 1)
}

func noTick(t *testing.T, w *Worker, when string) {
	t.Helper()
	select {
	case <-w.wake:
		t.Fatalf("ticked %s", when)
	default:
	}
}

func TestSchedulerDropsMissedTicks(t *testing.T) {
	c := testingclock.NewFakeClock(epoch)
	s := newScheduler(c)
	w := schedWorker()
	s.add(w, 0, 10*time.Second)
	defer s.remove(w)

	waitArmed(t, c)
	c.Step(35 * time.Second)
	if due := tick(t, w); due != 10*time.Second {
		t.Fatalf("due = %v, want 10s", due)
	}
	// Ticks due at 20s and 30s are dropped; the next is on the grid at 40s.
	waitArmed(t, c)
	c.Step(4 * time.Second)
	noTick(t, w, "before the grid point")
	c.Step(time.Second)
	if due := tick(t, w); due != 40*time.Second {
		t.Fatalf("due = %v, want 40s", due)
	}
}

// A tick still pending when the next is due is not replaced: the worker
// learns how late the first one was.
func TestSchedulerKeepsOnePendingTick(t *testing.T) {
	c := testingclock.NewFakeClock(epoch)
	s := newScheduler(c)
	w := schedWorker()
	s.add(w, 0, 10*time.Second)
	defer s.remove(w)
	for i := 0; i < 3; i++ {
		waitArmed(t, c)
		c.Step(10 * time.Second)
	}
	waitArmed(t, c)
	if due := tick(t, w); due != 10*time.Second {
		t.Fatalf("due = %v, want the first, 10s", due)
	}
}

func TestSchedulerResetDropsPendingTick(t *testing.T) {
	c := testingclock.NewFakeClock(epoch)
	s := newScheduler(c)
	w := schedWorker()
	s.add(w, 0, 10*time.Second)
	defer s.remove(w)

	waitArmed(t, c)
	c.Step(10 * time.Second) // a tick is pending
	recv(t, w.wake, "tick")
	s.reset(w)
	if w.pending.Load() != 0 {
		t.Fatal("reset kept a pending tick")
	}
	waitArmed(t, c)
	c.Step(9 * time.Second)
	noTick(t, w, "before a whole period after the reset")
	c.Step(time.Second)
	if due := tick(t, w); due != 20*time.Second {
		t.Fatalf("due = %v, want 20s", due)
	}
}

// Workers share one timer; the last one out stops it and the loop ends.
func TestSchedulerSharedTimer(t *testing.T) {
	c := testingclock.NewFakeClock(epoch)
	s := newScheduler(c)
	a, b := schedWorker(), schedWorker()
	s.add(a, 3*time.Second, 10*time.Second)
	s.add(b, 7*time.Second, 10*time.Second)
	waitArmed(t, c)
	c.Step(3 * time.Second)
	if due := tick(t, a); due != 3*time.Second {
		t.Fatalf("a due = %v", due)
	}
	waitArmed(t, c)
	c.Step(4 * time.Second)
	if due := tick(t, b); due != 7*time.Second {
		t.Fatalf("b due = %v", due)
	}
	noTick(t, a, "twice")
	s.remove(a)
	s.remove(b)
	if c.HasWaiters() {
		t.Error("timer left armed after the last worker left")
	}
}

// waitArmed waits until the scheduler's loop has armed its timer on c.
func waitArmed(t *testing.T, c *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !c.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("timer never armed")
		}
		time.Sleep(time.Millisecond)
	}
}

// steppingClock moves its fake clock forward just before a timer is set,
// once, as a test stepping the clock between the loop's reading of it and
// its arming of the timer would.
type steppingClock struct {
	*testingclock.FakeClock
	by   time.Duration
	once *sync.Once
}

func (c steppingClock) step() { c.once.Do(func() { c.Step(c.by) }) }

func (c steppingClock) NewTimer(d time.Duration) clock.Timer {
	c.step()
	return steppingTimer{c.FakeClock.NewTimer(d), c}
}

type steppingTimer struct {
	clock.Timer
	c steppingClock
}

func (t steppingTimer) Reset(d time.Duration) bool {
	t.c.step()
	return t.Timer.Reset(d)
}

// A tick that fell due while the timer was being set is delivered then, not
// when a later step happens to pass the late timer.
func TestSchedulerClockMovedWhileArming(t *testing.T) {
	c := steppingClock{testingclock.NewFakeClock(epoch), 10 * time.Second, new(sync.Once)}
	s := newScheduler(c)
	w := schedWorker()
	s.add(w, 0, 10*time.Second)
	defer s.remove(w)
	// Arming for 10s moved the clock to 10s: the tick is due already.
	if due := tick(t, w); due != 10*time.Second {
		t.Fatalf("due = %v, want 10s", due)
	}
	// The grid goes on from there, on the timer.
	waitArmed(t, c.FakeClock)
	c.Step(10 * time.Second)
	if due := tick(t, w); due != 20*time.Second {
		t.Fatalf("due = %v, want 20s", due)
	}
}
