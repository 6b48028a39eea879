//go:build runtime

package runtimetest

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/pkg/cri"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// TestStopHonoursGrace stops containers that treat their stop signal
// differently. Which signal ended the container is read from its exit code
// (0: its trap ran; 137: SIGKILL); how long the stop took is measured, with
// tolerances for a loaded machine, never slept.
func TestStopHonoursGrace(t *testing.T) {
	const (
		long  = 20 * time.Second // for containers that must not need it
		short = 3 * time.Second  // for the one that must be killed after it
	)
	cases := []struct {
		name     string
		image    string
		script   string
		grace    time.Duration
		wantCode int32
		min, max time.Duration
	}{
		// Exits on SIGTERM: long before the grace period ends.
		{"traps SIGTERM", ctrd.BusyboxImage, `trap "exit 0" TERM; sleep 100000 & wait`,
			long, 0, 0, long / 2},
		// Ignores SIGTERM: SIGKILL once the grace period is over, not before.
		{"ignores SIGTERM", ctrd.BusyboxImage, `trap "" TERM; sleep 100000 & wait`,
			short, 137, short, short + 5*time.Second},
		// The image's StopSignal is SIGUSR1: that is what must be sent.
		{"image stop signal", ctrd.BusyboxStopSignalImage, `trap "" TERM; trap "exit 0" USR1; sleep 100000 & wait`,
			long, 0, 0, long / 2},
	}
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		// A group, so the parallel cases finish before rt is closed.
		t.Run("group", func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					c := newContainer(t, ctrd.ContainerSpec{Image: tc.image, Command: []string{"sh", "-c", tc.script}})
					waitRunningShell(t, c)
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					start := time.Now()
					if err := rt.StopContainer(ctx, c.RuntimeID(), tc.grace); err != nil {
						t.Fatal(err)
					}
					took := time.Since(start)
					st := waitExited(t, c.ID)
					t.Logf("stopped in %v (want %v..%v), exit code %d", took, tc.min, tc.max, st.GetExitCode())
					if took < tc.min || took > tc.max {
						t.Errorf("stop took %v, want between %v and %v", took, tc.min, tc.max)
					}
					if st.GetExitCode() != tc.wantCode {
						t.Errorf("exit code %d, want %d", st.GetExitCode(), tc.wantCode)
					}
					// Stopping again is not an error.
					if err := rt.StopContainer(ctx, c.RuntimeID(), tc.grace); err != nil {
						t.Errorf("second stop: %v", err)
					}
				})
			}
		})
	})
}

// waitRunningShell waits until the container's shell has set its traps: a
// signal sent before that would meet the default disposition.
func waitRunningShell(t *testing.T, c *ctrd.Container) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(processesMatching(t, c.ID, "sleep 100000")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("container shell never started its sleep")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitExited waits until CRI reports the container exited, which is what the
// kubelet acts on, and returns its status.
func waitExited(t *testing.T, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := need(t).ContainerStatus(ctx, id)
		cancel()
		if err == nil && st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("container status %v (%v), want EXITED", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
