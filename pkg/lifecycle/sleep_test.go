package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"
)

func sleepHook(s int64) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: s}}
}

// waitForTimer waits until the code under test waits on clk.
func waitForTimer(t *testing.T, clk *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for a timer on the fake clock")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSleepHook(t *testing.T) {
	app := &v1.Container{Name: "app"}
	t.Run("returns once the seconds have passed", func(t *testing.T) {
		clk := testingclock.NewFakeClock(time.Unix(0, 0))
		r := New(nil, Options{Clock: clk})
		done := runAsync(func() error { return r.Run(context.Background(), testPod(""), app, "containerd://abc", sleepHook(5)) })
		waitForTimer(t, clk)
		clk.Step(4999 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("sleep 5 returned after 4.999s: %v", err)
		default:
		}
		clk.Step(time.Millisecond)
		if err := recvErr(t, done, "the sleep hook"); err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	t.Run("cut short it fails with the kubelet's message", func(t *testing.T) {
		clk := testingclock.NewFakeClock(time.Unix(0, 0))
		r := New(nil, Options{Clock: clk})
		ctx, cancel := context.WithCancel(context.Background())
		done := runAsync(func() error { return r.Run(ctx, testPod(""), app, "containerd://abc", sleepHook(30)) })
		waitForTimer(t, clk)
		cancel()
		err := recvErr(t, done, "the sleep hook")
		want := `Sleep lifecycle hook (30) for Container "app" in Pod "web_ns(uid-1)" failed - error: container terminated before sleep hook finished`
		if err == nil || err.Error() != want || !errors.As(err, new(*HookError)) {
			t.Errorf("Run = %v, want %q", err, want)
		}
	})
	t.Run("zero seconds returns at once", func(t *testing.T) {
		clk := testingclock.NewFakeClock(time.Unix(0, 0))
		if err := New(nil, Options{Clock: clk}).Run(context.Background(), testPod(""), app, "containerd://abc", sleepHook(0)); err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}
