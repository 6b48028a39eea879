//go:build integration

package integration

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// statusWrites is probed's count of successful status writes.
func (p *probedProc) statusWrites(t *testing.T) int {
	t.Helper()
	for _, l := range p.metricLines(`probed_status_writes_total{outcome="success"}`) {
		f := strings.Fields(l)
		n, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		return int(n)
	}
	return 0
}

// TestSubSecondPeriodOnTheAPIServer: a readiness probe every 100 ms
// (probed.io/periodMilliseconds) with failureThreshold 2 flips its
// condition on the real apiserver, with exactly one status write per
// transition. The flip-to-condition latency, measured from the target's
// change to the watch event, is logged (p50, p99; the target is
// period x threshold + 100 ms = 300 ms), not asserted.
func TestSubSecondPeriodOnTheAPIServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	app := startHTTPTarget(t, ip, true)
	pod := e.createPod("fast", mustJSON(probes{
		"app": {"readinessProbe": map[string]any{
			"httpGet":                       map[string]any{"path": "/ready", "port": app.Port},
			"failureThreshold":              2,
			"probed.io/periodMilliseconds":  100,
			"probed.io/timeoutMilliseconds": 100,
		}},
	}), true, container{name: "app"})
	e.runPod(pod, ip, time.Minute)
	p := e.startProbed()
	e.waitCond("fast", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	eventually(t, "the aggregate condition", 10*time.Second, func() bool { return e.condIs("fast", "probed.io/ready", v1.ConditionTrue) })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := client.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", "fast").String(),
		ResourceVersion: e.pod("fast").ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	waitFor := func(want v1.ConditionStatus) time.Time {
		t.Helper()
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("watch ended")
				}
				if pod, ok := ev.Object.(*v1.Pod); ok {
					if c := condition(pod, "ready.probed.io/app"); c != nil && c.Status == want {
						return time.Now()
					}
				}
			case <-ctx.Done():
				t.Fatalf("no %s condition in time", want)
			}
		}
	}

	const flips = 20
	var lat []time.Duration
	healthy := true
	for i := range flips {
		before := p.statusWrites(t)
		healthy = !healthy
		want := v1.ConditionFalse
		if healthy {
			want = v1.ConditionTrue
		}
		t0 := time.Now()
		app.Set(healthy)
		lat = append(lat, waitFor(want).Sub(t0))
		// One write per transition: the condition and the aggregate go in
		// one apply, and the probes that follow write nothing.
		eventually(t, "the write counted", 5*time.Second, func() bool { return p.statusWrites(t) >= before+1 })
		consistently(t, "no second write", 500*time.Millisecond, func() bool { return p.statusWrites(t) == before+1 })
		if !e.condIs("fast", "probed.io/ready", want) {
			t.Errorf("flip %d: the aggregate condition is not %s", i, want)
		}
	}
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	t.Logf("flip-to-condition latency at a 100 ms period, failureThreshold 2, %d flips: p50 %v, p99 %v, max %v (target p99 <= 300ms)",
		flips, pct(0.50), pct(0.99), lat[len(lat)-1])
}
