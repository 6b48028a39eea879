package netns_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/probed-dev/probed/pkg/netns"
	"github.com/probed-dev/probed/pkg/netns/netnstest"
)

// A thread whose way back fails is never reused: it ends with its
// goroutine, and no thread is left in the pod's namespace.
func TestThreadThatCannotLeaveEnds(t *testing.T) {
	ns := netnstest.New(t)
	calls := 0
	defer netns.SetSetns(func(fd, nstype int) error {
		calls++
		if calls == 2 { // the way back
			return errors.New("setns back refused (test)")
		}
		return unix.Setns(fd, nstype)
	})()
	before := netns.StuckThreads()
	var tid int
	err := ns.Do(func() error { tid = unix.Gettid(); return nil })
	if err == nil {
		t.Fatal("Do succeeded though the way back failed")
	}
	if got := netns.StuckThreads(); got != before+1 {
		t.Errorf("StuckThreads = %d; want %d", got, before+1)
	}
	// The runtime ends the thread shortly after its goroutine.
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := netnstest.ThreadsOutside()
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still alive in the namespace: %v", tid, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
