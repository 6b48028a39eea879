package kill

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/probespec"
)

// flakyKiller fails its first failures kills, then kills.
type flakyKiller struct {
	failures int
	calls    int
}

func (f *flakyKiller) Kill(context.Context, *v1.Pod, *v1.Container, string, probespec.ProbeType, *v1.Probe) error {
	f.calls++
	if f.calls <= f.failures {
		return errors.New("runtime unavailable")
	}
	return nil
}

func nsPod(ns, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "app"}}}}
}

// Issue 31, 1: a kill that fails is retried by the worker on every period
// while the container runs; the retries of that one kill decision spend
// no more of the node's budget, so they cannot defer the restarts of
// every other pod on the node. A kill that went through, and a later
// decision, spend again.
func TestFailedKillSpendsTheBudgetOncePerDecision(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	inner := &flakyKiller{failures: 12}
	k := &Guard{Inner: inner, Budget: NewBudget(10, clk), Recorder: &recorder{}, Metrics: NewMetrics(prometheus.NewRegistry()), Clock: clk}
	ctx := context.Background()
	app := &v1.Container{Name: "app"}
	pod := nsPod("shop", "web")
	for i := range 12 {
		if err := k.Kill(ctx, pod, app, "containerd://web", probespec.Liveness, &v1.Probe{}); err == nil || isDeferral(err) {
			t.Fatalf("attempt %d: %v, want the runtime's failure", i+1, err)
		}
		clk.Step(100 * time.Millisecond) // a fifth of a token in all
	}
	if got := k.Budget.Available(); got != 9 {
		t.Fatalf("12 attempts of one kill left %d of 10 restarts, want 9", got)
	}
	// Another pod's restart is not deferred.
	if err := k.Kill(ctx, nsPod("shop", "db"), app, "containerd://db", probespec.Liveness, &v1.Probe{}); err != nil {
		t.Fatalf("another pod's kill: %v", err)
	}
	// The retry that goes through takes nothing either.
	if err := k.Kill(ctx, pod, app, "containerd://web", probespec.Liveness, &v1.Probe{}); err != nil {
		t.Fatalf("the last retry: %v", err)
	}
	if got := k.Budget.Available(); got != 8 {
		t.Fatalf("budget left %d, want 8", got)
	}
	// A new decision on the same container (its stop did not take) spends anew.
	if err := k.Kill(ctx, pod, app, "containerd://web", probespec.Liveness, &v1.Probe{}); err != nil {
		t.Fatal(err)
	}
	if got := k.Budget.Available(); got != 7 {
		t.Fatalf("budget left %d after a new decision, want 7", got)
	}
}

func isDeferral(err error) bool { _, ok := AsDeferred(err); return ok }

// goneRuntime no longer knows any container.
type goneRuntime struct{ stops int }

func (r *goneRuntime) StopContainer(_ context.Context, id string, _ time.Duration) error {
	r.stops++
	return fmt.Errorf("stop container %s: %w", id, cri.ErrContainerNotFound)
}

func (r *goneRuntime) CheckOwner(_ context.Context, id string) error {
	return fmt.Errorf("container %s: %w", id, cri.ErrContainerNotFound)
}

// Issue 31, 1, the regression as a worker sees it: its container exited
// and was removed as its liveness probe failed. The kill is done at once
// (Killing, then a stop whose NotFound is done), spends one token, and
// another namespace's restarts go on; before, every retry failed with
// "container not found", spent a token, and after ten of them the node's
// other restarts were deferred.
func TestKillOfAGoneContainerSpendsOneToken(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	rt := &goneRuntime{}
	rec := &recorder{}
	k := &Guard{Inner: &RuntimeKiller{Runtime: rt, Recorder: rec}, Budget: NewBudget(10, clk), Recorder: rec,
		Metrics: NewMetrics(prometheus.NewRegistry()), Clock: clk}
	ctx := context.Background()
	app := &v1.Container{Name: "app"}
	// The worker retries a failed kill on every period while the pod's
	// status says the container runs.
	attempts := 0
	for range 15 {
		attempts++
		if err := k.Kill(ctx, nsPod("shop", "web"), app, "containerd://gone", probespec.Liveness, &v1.Probe{}); err == nil {
			break
		}
		clk.Step(time.Second)
	}
	if attempts != 1 || rt.stops != 1 {
		t.Errorf("%d kill attempts, %d stops; want the first to be done", attempts, rt.stops)
	}
	if evs := rec.byReason("Killing"); len(evs) != 1 || evs[0].message != "Container app failed liveness probe, will be restarted" {
		t.Errorf("Killing events %+v, want one", evs)
	}
	if got := k.Budget.Available(); got != 9 {
		t.Errorf("budget left %d of 10, want 9", got)
	}
	if err := k.Kill(ctx, nsPod("other", "db"), app, "containerd://db", probespec.Liveness, &v1.Probe{}); err != nil {
		t.Errorf("another namespace's kill: %v", err)
	}
	if evs := rec.byReason(ReasonRestartBudgetExceeded); len(evs) != 0 {
		t.Errorf("restarts deferred: %+v", evs)
	}
}
