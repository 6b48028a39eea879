package kill

import (
	"testing"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// armingClock is a FakeClock that reports each timer it arms, so that a
// test steps time only once the preStop wait has begun.
type armingClock struct {
	*testingclock.FakeClock
	armed chan time.Duration
}

func newStepClock(now time.Time) *armingClock {
	return &armingClock{FakeClock: testingclock.NewFakeClock(now), armed: make(chan time.Duration, 16)}
}

func (c *armingClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.armed <- d
	return t
}

// recv waits for one value on ch, failing the test after a while.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}
