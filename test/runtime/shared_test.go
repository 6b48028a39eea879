//go:build runtime

package runtimetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// TestIdenticalExecsShareOneRun: with --exec-share-runs, a liveness and a
// readiness probe running the same command together in a real container
// cause one exec of it; both get its output. Without the flag, two.
func TestIdenticalExecsShareOneRun(t *testing.T) {
	c := newContainer(t, ctrd.ContainerSpec{Command: idleCommand})
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		for _, share := range []bool{true, false} {
			reg := prometheus.NewRegistry()
			l := decorator.NewLimited(rt, 4, decorator.NewMetrics(reg))
			if share {
				l.ShareIdenticalExecs(clock.RealClock{})
			}
			marker := "/tmp/runs-" + cri.RuntimeName(rt)
			if share {
				marker += "-shared"
			}
			// Each run of the probe's command leaves a line in marker.
			cmd := []string{"sh", "-c", "echo run >> " + marker + "; sleep 1; echo healthy"}
			type result struct {
				out  string
				code int
				err  error
			}
			results := make(chan result, 2)
			probe := func() {
				out, code, err := l.ExecInContainer(context.Background(), c.RuntimeID(), cmd, 5*time.Second)
				results <- result{string(out), code, err}
			}
			go probe()
			// The second fires while the first runs (its line is written).
			deadline := time.Now().Add(10 * time.Second)
			for {
				out, _, _ := rt.ExecInContainer(context.Background(), c.RuntimeID(), []string{"cat", marker}, 5*time.Second)
				if strings.Count(string(out), "run") >= 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the first exec never started")
				}
				time.Sleep(20 * time.Millisecond)
			}
			go probe()
			for i := 0; i < 2; i++ {
				r := <-results
				if r.err != nil || r.code != 0 || r.out != "healthy\n" {
					t.Errorf("share=%v: probe result %+v", share, r)
				}
			}
			out, _, err := rt.ExecInContainer(context.Background(), c.RuntimeID(), []string{"cat", marker}, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			runs, want := strings.Count(string(out), "run"), 2
			if share {
				want = 1
			}
			if runs != want {
				t.Errorf("share=%v: the command ran %d times, want %d", share, runs, want)
			}
			if got := counterValue(t, reg, "probed_runtime_exec_shared_total", nil); got != float64(2-want) {
				t.Errorf("share=%v: probed_runtime_exec_shared_total = %v, want %d", share, got, 2-want)
			}
		}
	})
}
