//go:build runtime

package runtimetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/results"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// execMargin is the hang margin for exec probes: containerd, the shim and
// runc add their own latency, more so under -race.
const execMargin = 5 * time.Second

func execSpec(timeout time.Duration, cmd ...string) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: int32(timeout / time.Second), ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}}
}

// timedOut is the kubelet's exec timeout text.
func timedOut(cmd []string, timeout time.Duration) string {
	return fmt.Sprintf("command timed out: %q timed out after %s", strings.Join(cmd, " "), timeout)
}

// TestHostileExec runs hostile exec probes through the real containerd and
// the exec cap: 64 MiB of output, endless output, and a command whose forked
// children hang holding the output pipe.
func TestHostileExec(t *testing.T) {
	c := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		p := prober.New(decorator.NewLimited(rt, decorator.DefaultMaxConcurrentExecs, nil), prober.Options{})
		target := prober.Target{ContainerID: c.RuntimeID()}

		t.Run("64 MiB of output", func(t *testing.T) {
			const timeout = 10 * time.Second
			got := probeWithin(t, p, execSpec(timeout, "head", "-c", "67108864", "/dev/zero"), target, nil, 3*(timeout+execMargin))
			t.Logf("%v", got)
			if isNative(rt) {
				if got.res != results.Success || got.out != strings.Repeat("\x00", prober.MaxOutputBytes) || got.err != nil {
					t.Errorf("native: want success with the first 10 KiB, got %v", got)
				}
				return
			}
			// containerd's CRI refuses to send more than 16 MiB: the
			// kubelet's probe errors the same way (and retries).
			if got.res != results.Failure || got.err == nil || !strings.Contains(got.err.Error(), "output too large") {
				t.Errorf("CRI: want containerd's refusal, got %v", got)
			}
		})

		t.Run("endless output", func(t *testing.T) {
			const timeout = 2 * time.Second
			cmd := []string{"yes", "hostile-5060"}
			got := probeWithin(t, p, execSpec(timeout, cmd...), target, nil, 3*(timeout+execMargin))
			t.Logf("%v", got)
			if killsTree(rt) {
				want := timedOut(cmd, timeout)
				if got.res != results.Failure || got.out != want || got.err != nil {
					t.Errorf("%s: want failure %q, got %v", cri.RuntimeName(rt), want, got)
				}
				if left := processesMatching(t, c.ID, "hostile-5060"); len(left) > 0 {
					t.Errorf("%s: left running: %v", cri.RuntimeName(rt), left)
				}
			} else if got.res != results.Failure {
				t.Errorf("CRI: want a failure, got %v", got)
			}
			killMatching(t, c.ID, "hostile-5060")
		})

		t.Run("forked children hang on the pipe", func(t *testing.T) {
			const timeout = 2 * time.Second
			cmd := []string{"sh", "-c", "sleep 5071 & setsid sleep 5072 & (sleep 5073; echo late) & sleep 5074"}
			got := probeWithin(t, p, execSpec(timeout, cmd...), target, nil, timeout+execMargin)
			want := timedOut(cmd, timeout)
			if got.res != results.Failure || got.out != want || got.err != nil ||
				len(got.events) != 1 || got.events[0] != "Warning Unhealthy Readiness probe failed: "+want {
				t.Errorf("want failure %q, got %v", want, got)
			}
			left := processesMatching(t, c.ID, "sleep 507")
			t.Logf("left in the container: %v", left)
			if killsTree(rt) {
				// The whole tree, the setsid child included, is gone.
				if len(left) > 0 {
					t.Errorf("%s: processes survived the timeout: %v", cri.RuntimeName(rt), left)
				}
				if z := zombies(t, c.ID); len(z) > 0 {
					t.Errorf("%s: zombies: %v", cri.RuntimeName(rt), z)
				}
			}
			// CRI (containerd 1.6) kills only the command, as for the kubelet.
			killMatching(t, c.ID, "sleep 507")
		})
	})
}
