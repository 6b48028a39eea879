//go:build runtime

package runtimetest

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/lifecycle"
	"github.com/probed-dev/probed/pkg/probespec"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// TestPreStopExecHook kills containers as probed does for a liveness
// failure (the real RuntimeKiller and lifecycle.Runner on each runtime
// client): the preStop exec hook runs in the container before the stop
// signal. The container's SIGTERM trap tells by its exit code whether the
// hook's mark was there when SIGTERM came: 7 yes, 9 no.
func TestPreStopExecHook(t *testing.T) {
	const app = `trap 'if [ -e /tmp/hook-ran ]; then exit 7; else exit 9; fi' TERM; sleep 100000 & wait`
	cases := []struct {
		name       string
		hook       string
		grace      int64
		wantFailed bool // a FailedPreStopHook event
	}{
		{"hook finishes", "touch /tmp/hook-ran", 30, false},
		// Still running at the 2 s deadline: the stop goes ahead, and the
		// hook ends with its container.
		{"hook outlives the grace period", "touch /tmp/hook-ran; sleep 100000", 2, true},
	}
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		t.Run("group", func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					c := newContainer(t, ctrd.ContainerSpec{Name: "app", Command: []string{"sh", "-c", app}})
					waitRunningShell(t, c)
					pod := &v1.Pod{
						ObjectMeta: metav1.ObjectMeta{Name: "prestop", Namespace: "ns", UID: "uid-prestop"},
						Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &tc.grace},
					}
					container := &v1.Container{Name: "app", Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{
						Exec: &v1.ExecAction{Command: []string{"sh", "-c", tc.hook}},
					}}}
					events := &eventLog{}
					k := &kill.RuntimeKiller{Runtime: rt, Hooks: lifecycle.New(rt, lifecycle.Options{}), Recorder: events}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					start := time.Now()
					if err := k.Kill(ctx, pod, container, c.RuntimeID(), probespec.Liveness, nil); err != nil {
						t.Fatalf("Kill: %v", err)
					}
					took := time.Since(start)
					st := waitExited(t, c.ID)
					t.Logf("Kill took %v; exit code %d; events %q", took, st.GetExitCode(), events.events)
					if st.GetExitCode() != 7 {
						t.Errorf("exit code %d, want 7: the hook's mark present at SIGTERM", st.GetExitCode())
					}
					if !events.has("Normal Killing app: Container app failed liveness probe, will be restarted") {
						t.Errorf("no Killing event: %q", events.events)
					}
					if got := events.has("Warning FailedPreStopHook app: PreStopHook failed"); got != tc.wantFailed {
						t.Errorf("FailedPreStopHook event %v, want %v: %q", got, tc.wantFailed, events.events)
					}
					// Not a timing goal: a hook that never ends must not hold the kill.
					if took > 30*time.Second {
						t.Errorf("Kill took %v", took)
					}
				})
			}
		})
	})
}
