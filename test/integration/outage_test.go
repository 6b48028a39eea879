//go:build integration

package integration

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The API server stopped for 30 s while targets flip: probed keeps probing,
// and within 5 s of recovery the conditions match the targets' final health.
// A probed started during the outage is alive but not ready until it syncs.
// Not parallel: it stops the shared API server.
func TestAPIServerOutage(t *testing.T) {
	e := newEnv(t)
	ip := loopbackIP()
	a := startHTTPTarget(t, ip, true)
	b := startHTTPTarget(t, ip, false)
	podA := e.createPod("a", mustJSON(probes{"app": {"readinessProbe": httpProbe(a.Port, "/ready", nil)}}), true, container{name: "app"})
	podB := e.createPod("b", mustJSON(probes{"app": {"readinessProbe": httpProbe(b.Port, "/ready", nil)}}), true, container{name: "app"})
	e.runPod(podA, ip, time.Minute)
	e.runPod(podB, ip, time.Minute)
	p := e.startProbed()
	e.waitCond("a", "probed.io/ready", v1.ConditionTrue, 20*time.Second)
	e.waitCond("b", "probed.io/ready", v1.ConditionFalse, 20*time.Second)

	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// A second node's probed, started mid-outage, must not claim readiness.
	late := newEnvNoAPI(t)
	lp := late.startProbedNoWait()
	eventually(t, "late probed alive", 30*time.Second, func() bool { c, _ := lp.get("/healthz"); return c == http.StatusOK })
	if c, body := lp.get("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the outage = %d %q, want 503", c, body)
	}

	// Flip both targets several times; end with a unhealthy, b healthy.
	for i := 0; i < 3; i++ {
		a.Set(i%2 == 1)
		b.Set(i%2 == 0)
		time.Sleep(3 * time.Second) // let probed see each state; the API is down, nothing to poll
	}
	a.Set(false)
	b.Set(true)
	hits := a.hits.Load()
	eventually(t, "probing goes on during the outage", 10*time.Second, func() bool { return a.hits.Load() >= hits+2 })
	if wait := 30*time.Second - time.Since(stopped); wait > 0 {
		time.Sleep(wait)
	}
	if err := cp.StartAPIServer(e.ctx); err != nil {
		t.Fatal(err)
	}
	recovered := time.Now()
	eventually(t, "conditions converge after recovery", 5*time.Second, func() bool {
		return e.condIs("a", "probed.io/ready", v1.ConditionFalse) && e.condIs("b", "probed.io/ready", v1.ConditionTrue)
	})
	t.Logf("converged %v after the API server came back", time.Since(recovered).Round(10*time.Millisecond))
	// client-go's reflector backs off up to ~30 s while the API server is down.
	eventually(t, "late probed ready after sync", 60*time.Second, func() bool { c, _ := lp.get("/readyz"); return c == http.StatusOK })
	select {
	case <-p.Done():
		t.Fatal("probed exited during the outage")
	default:
	}
}

// newEnvNoAPI names a node and namespace without touching the API server.
func newEnvNoAPI(t *testing.T) *testEnv {
	n := seq.Add(1)
	return &testEnv{t: t, ctx: t.Context(), node: "late-" + itoa(n), ns: "late-" + itoa(n)}
}

// The latency from a target flip to the condition flip in the API server,
// and the API writes each transition costs (issue 6, figure 8): 10 pods, 10
// flips each, periodSeconds 1, thresholds 1. Each flip waits a random part of
// the period first, so that flips are not phase-locked to the probe ticks.
// It asserts every flip lands with exactly one status write; it times
// nothing. FLIP_OUT names a file to which it appends its figures as one
// JSON line (make bench sets it).
func TestFlipLatency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	const pods, flips = 10, 10
	targets := make([]*httpTarget, pods)
	for i := range targets {
		targets[i] = startHTTPTarget(t, ip, true)
		pod := e.createPod("flip-"+itoa(int64(i)), mustJSON(probes{"app": {"readinessProbe": httpProbe(targets[i].Port, "/ready", map[string]any{"failureThreshold": 1})}}), true, container{name: "app"})
		e.runPod(pod, ip, time.Minute)
	}
	p := e.startProbed()
	for i := range targets {
		e.waitCond("flip-"+itoa(int64(i)), "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	}
	writesBefore := statusWrites(p)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for i := range targets {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(i), 7))
			name := "flip-" + itoa(int64(i))
			healthy := true
			for f := 0; f < flips; f++ {
				time.Sleep(time.Duration(rnd.Int64N(int64(time.Second))))
				healthy = !healthy
				want := v1.ConditionFalse
				if healthy {
					want = v1.ConditionTrue
				}
				start := time.Now()
				targets[i].Set(healthy)
				for !e.condIs(name, "ready.probed.io/app", want) {
					if time.Since(start) > 20*time.Second {
						t.Errorf("%s: flip %d to %s never landed", name, f, want)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				mu.Lock()
				lat = append(lat, time.Since(start))
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	if len(lat) != pods*flips {
		t.Fatalf("%d of %d flips measured", len(lat), pods*flips)
	}
	// A write for the last flip may still be counted just after the
	// condition is seen; wait for the counter to settle.
	var writes map[string]float64
	eventually(t, "status writes settle", 10*time.Second, func() bool {
		writes = statusWrites(p)
		return writes["success"]-writesBefore["success"] >= pods*flips
	})
	ok := writes["success"] - writesBefore["success"]
	failed := writes["error"] + writes["conflict"] - writesBefore["error"] - writesBefore["conflict"]
	if ok != pods*flips || failed != 0 {
		t.Errorf("%v successful and %v failed status writes for %d transitions, want exactly one successful write each", ok, failed, pods*flips)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	t.Logf("target flip -> condition flip over %d flips (periodSeconds=1, thresholds=1): median %v, p90 %v, p99 %v, worst %v; %v status writes (%.2f per transition)",
		len(lat), q(0.5).Round(time.Millisecond), q(0.9).Round(time.Millisecond), q(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), ok, ok/float64(pods*flips))
	if out := os.Getenv("FLIP_OUT"); out != "" {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b, _ := json.Marshal(map[string]any{
			"transitions": len(lat), "status_writes": ok, "failed_writes": failed,
			"writes_per_transition": ok / float64(pods*flips),
			"period_seconds":        1, "failure_threshold": 1, "success_threshold": 1,
			"latency_ms":    map[string]float64{"p50": ms(q(0.5)), "p90": ms(q(0.9)), "p99": ms(q(0.99)), "max": ms(lat[len(lat)-1])},
			"target_p99_ms": 1100,
		})
		// One JSON line per run: make bench runs it with -count=N.
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			_, err = f.Write(append(b, '\n'))
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			t.Error(err)
		}
	}
}

// statusWrites reads probed_status_writes_total by outcome.
func statusWrites(p *probedProc) map[string]float64 {
	out := map[string]float64{}
	for _, l := range p.metricLines("probed_status_writes_total{") {
		i := strings.Index(l, `outcome="`)
		j := strings.LastIndexByte(l, ' ')
		if i < 0 || j < 0 {
			continue
		}
		name := l[i+len(`outcome="`):]
		name = name[:strings.IndexByte(name, '"')]
		v, err := strconv.ParseFloat(l[j+1:], 64)
		if err == nil {
			out[name] += v
		}
	}
	return out
}
