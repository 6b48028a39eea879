package worker

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestScheduleDropsMissedTicks(t *testing.T) {
	c := testingclock.NewFakeClock(epoch)
	s := newSchedule(c, 10*time.Second)
	defer s.stop()

	c.Step(35 * time.Second)
	recv(t, s.C(), "tick")
	if due := s.fired(); !due.Equal(epoch.Add(10 * time.Second)) {
		t.Fatalf("due = %v, want 10s", due.Sub(epoch))
	}
	// Ticks due at 20s and 30s are dropped; the next is on the grid at 40s.
	if !s.next.Equal(epoch.Add(40 * time.Second)) {
		t.Fatalf("next = %v, want 40s", s.next.Sub(epoch))
	}
	c.Step(4 * time.Second)
	select {
	case <-s.C():
		t.Fatal("ticked before the grid point")
	default:
	}
	c.Step(time.Second)
	recv(t, s.C(), "tick at 40s")
}

func TestScheduleResetDropsPendingTick(t *testing.T) {
	c := testingclock.NewFakeClock(epoch)
	s := newSchedule(c, 10*time.Second)
	defer s.stop()

	c.Step(10 * time.Second) // a tick is pending
	s.reset()
	select {
	case <-s.C():
		t.Fatal("reset kept a pending tick")
	default:
	}
	if !s.next.Equal(epoch.Add(20 * time.Second)) {
		t.Fatalf("next = %v, want 20s", s.next.Sub(epoch))
	}
	c.Step(10 * time.Second)
	recv(t, s.C(), "tick a period after the reset")
}
