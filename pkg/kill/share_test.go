package kill

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/pkg/probespec"
)

// Issue 30, 9: namespace "loop" crash-loops 100 containers, whose kills the
// workers retry every 10 s, ahead of everyone else. From 30 s on, one
// container of namespace "quiet" fails too. The node's budget is 10 a
// minute. With one bucket for all, the loop's retries took every token and
// quiet's restart waited for the loop to end; with a share per namespace,
// quiet's kill goes through within its share's refill of one token (12 s)
// and a retry period, and the node never restarts more than its budget.
func TestNamespaceLoopCannotExhaustAnothersRestarts(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	inner := &fakeKiller{}
	k := &Guard{Inner: inner, Budget: NewBudget(10, clk), Recorder: &recorder{}, Metrics: NewMetrics(prometheus.NewRegistry()), Clock: clk}
	ctx := context.Background()
	app := &v1.Container{Name: "app"}
	loop := make([]*v1.Pod, 100)
	for i := range loop {
		loop[i] = nsPod("loop", fmt.Sprintf("loop-%d", i))
	}
	killed := map[string]bool{}
	quiet := nsPod("quiet", "quiet")
	var quietAt time.Duration
	for tick := time.Duration(0); tick <= 10*time.Minute && quietAt == 0; tick += 10 * time.Second {
		clk.SetTime(epoch.Add(tick))
		for _, p := range loop {
			if !killed[p.Name] && k.Kill(ctx, p, app, "containerd://"+p.Name, probespec.Liveness, &v1.Probe{}) == nil {
				killed[p.Name] = true
			}
		}
		if tick >= 30*time.Second && k.Kill(ctx, quiet, app, "containerd://quiet", probespec.Liveness, &v1.Probe{}) == nil {
			quietAt = tick
		}
		if limit := 10 + int(tick/(6*time.Second)); inner.count() > limit {
			t.Fatalf("%d restarts by %v, over the node's budget of %d", inner.count(), tick, limit)
		}
	}
	if quietAt == 0 || quietAt > 30*time.Second+12*time.Second+10*time.Second {
		t.Fatalf("namespace quiet's restart, asked for from 30s, went through at %v (0: never, while the loop ran)", quietAt)
	}
	t.Logf("quiet's restart at %v; the loop had %d", quietAt, len(killed))
}

// The split itself: a namespace alone has the whole budget; with two, each
// has half the rate and burst; a namespace that has not asked for
// shareWindow gives its share back.
func TestBudgetSharesByNamespace(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	b := NewBudget(10, clk)
	take := func(ns string, n int) (ok int, v Verdict) {
		for range n {
			if v = b.Take(ns); v.OK {
				ok++
			}
		}
		return ok, v
	}
	if ok, _ := take("a", 12); ok != 10 {
		t.Fatalf("a alone took %d of a burst of 10", ok)
	}
	// b arrives: the node is spent, so b waits for its refill, while a's
	// share is now 5 a minute.
	if ok, v := take("b", 1); ok != 0 || v.ShareSpent || v.Namespaces != 2 || v.Share != 5 {
		t.Fatalf("b on a spent node: %d, %+v", ok, v)
	}
	clk.Step(time.Minute)
	okA, vA := take("a", 10)
	okB, _ := take("b", 10)
	if okA != 5 || !vA.ShareSpent || okB != 5 {
		t.Fatalf("a minute later a took %d (%+v) and b %d; want 5 each", okA, vA, okB)
	}
	// b goes quiet: after shareWindow a has the whole budget again.
	clk.Step(shareWindow + time.Second)
	if ok, v := take("a", 12); ok != 10 || v.Namespaces != 1 {
		t.Fatalf("a alone again took %d (%+v), want 10", ok, v)
	}
	// A clock stepping back mints nothing.
	clk.Step(-time.Hour)
	if ok, _ := take("a", 1); ok != 0 {
		t.Fatal("a restart allowed by a clock stepping back")
	}
}
