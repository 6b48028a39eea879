//go:build soak

package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Tolerances for "back to baseline" once every pod is gone. Workers and
// series must return exactly; a few goroutines and descriptors may differ by
// idle keep-alive connections (the test's /metrics scrapes, the API client).
const (
	goroutineTolerance = 10
	fdTolerance        = 5
	sampleEvery        = 5 * time.Second
	scrapeEvery        = 30 * time.Second
	sites              = 8
	primePods          = 30
)

// probedFlags are the soak's deviations from probed's defaults: loopback
// targets need the kubelet's host policy, there is no containerd, and 2,000
// pods turning over 10% every 30 s need more than the default 20 QPS.
var probedFlags = []string{"--kube-api-qps=50", "--kube-api-burst=100"}

func TestSoak(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := &cluster{ns: "soak", node: "soak-node", rng: rand.New(rand.NewPCG(8, 2000))}
	if _, err := cp.CreateNode(ctx, c.node); err != nil {
		t.Fatal(err)
	}
	if err := cp.EnsureNamespace(ctx, c.ns); err != nil {
		t.Fatal(err)
	}
	for i := range sites {
		c.sites = append(c.sites, startSite(t, fmt.Sprintf("127.0.77.%d", i+1)))
	}
	p := startProbed(t, c.node, probedFlags...)
	res := &result{Config: cfg, ProbedFlags: probedFlags, LoadStart: loadavg()}
	t.Logf("soak: %d pods × 3 probes for %v, waves every %v (churn %.0f%%, flips %.0f%%), probed pid %d",
		cfg.Pods, cfg.Duration, cfg.Wave, cfg.ChurnFraction*100, cfg.FlipFraction*100, p.PID())

	// Priming: one small cycle first, so that node-level series created
	// lazily (the lateness histograms) and lazily built pools are part of
	// the baseline rather than counted as growth.
	mustDo(t, "priming", c.add(ctx, primePods))
	c.releaseStarting()
	waitConverged(t, c, 3*time.Minute)
	eventually(t, "every probe type's first periodic tick", 2*time.Minute, func() bool {
		_, body := p.get("/metrics")
		for _, typ := range []string{"Liveness", "Readiness", "Startup"} {
			if !strings.Contains(body, `probed_probe_lateness_seconds_count{probe_type="`+typ+`"}`) {
				return false
			}
		}
		return true
	})
	mustDo(t, "priming", c.removeOldest(ctx, len(c.live)))
	res.Baseline = settle(t, p, nil)
	baseSeries := p.seriesNames()
	t.Logf("baseline: %s", res.Baseline)

	start := time.Now()
	smp := &sampler{p: p, start: start}
	stopSampling := smp.run()

	// Ramp to the steady number of pods.
	mustDo(t, "ramp", c.add(ctx, cfg.Pods))
	waitWorkers(t, p, 3*cfg.Pods, 5*time.Minute)
	rampEnd := time.Now()
	res.RampSeconds = rampEnd.Sub(start).Seconds()
	t.Logf("ramp: %d pods, %d workers after %.0fs", cfg.Pods, 3*cfg.Pods, res.RampSeconds)

	// Churn in waves.
	churnEnd := rampEnd.Add(cfg.Duration)
	warmupEnd := rampEnd.Add(time.Duration(cfg.WarmupFraction * float64(cfg.Duration)))
	churn := max(1, int(cfg.ChurnFraction*float64(cfg.Pods)))
	flips := max(1, int(cfg.FlipFraction*float64(cfg.Pods)))
	for wave := 1; time.Now().Before(churnEnd); wave++ {
		next := time.Now().Add(cfg.Wave)
		if !p.alive() {
			t.Fatalf("probed exited during wave %d: %v", wave, p.ExitErr())
		}
		c.releaseStarting()
		mustDo(t, "delete wave", c.removeOldest(ctx, churn))
		mustDo(t, "create wave", c.add(ctx, churn))
		mustDo(t, "flip", c.flip(flips))
		res.Waves = wave
		if d := time.Until(next); d > 0 {
			time.Sleep(min(d, time.Until(churnEnd)))
		}
	}

	// Every live pod's conditions must come to match its targets.
	c.releaseStarting()
	convStart := time.Now()
	res.Mismatches = waitConverged(t, c, 3*time.Minute)
	res.ConvergeSeconds = time.Since(convStart).Seconds()
	res.LivePodsChecked = len(c.live)
	t.Logf("final check: %d live pods, %d mismatches, converged in %.1fs", len(c.live), len(res.Mismatches), res.ConvergeSeconds)

	// Delete everything; probed must return to the baseline.
	mustDo(t, "final delete", c.removeOldest(ctx, len(c.live)))
	res.Final = settle(t, p, &res.Baseline)
	if added, removed := diff(p.seriesNames(), baseSeries); len(added)+len(removed) > 0 {
		t.Errorf("series differ from the baseline:\n  new: %v\n  gone: %v", added, removed)
	}
	stopSampling()
	res.LoadEnd = loadavg()
	res.PodsCreated, res.PodsDeleted, res.Flips = c.created, c.deleted, c.flips
	res.StatusWrites = res.Final.Metrics.Writes
	t.Logf("final: %s", res.Final)

	res.analyze(smp, warmupEnd, churnEnd, start)
	t.Logf("RSS slope after warm-up: %.1f KiB/min over %.1f min (bound %.0f KiB/min, asserted: %v)",
		res.RSSSlopeKiBPerMin, res.SlopeWindowMinutes, cfg.MaxRSSSlopeKiBPerMin, res.SlopeAsserted)
	t.Logf("per 1,000 workers (mean %.0f workers): CPU %.1f millicores, RSS %.1f MiB above baseline, Go heap %.1f MiB; peak RSS %.1f MiB",
		res.MeanWorkers, res.CPUMillicoresPer1000Workers, res.RSSMiBPer1000Workers, res.HeapMiBPer1000Workers, res.PeakRSSMiB)
	t.Logf("load average: start %s, end %s, mean 1-min during churn %.2f", res.LoadStart, res.LoadEnd, res.MeanLoad1)
	t.Logf("pods created %d, deleted %d, readiness flips %d, waves %d, status writes %v", res.PodsCreated, res.PodsDeleted, res.Flips, res.Waves, res.StatusWrites)

	if res.SlopeAsserted && res.RSSSlopeKiBPerMin > cfg.MaxRSSSlopeKiBPerMin {
		t.Errorf("RSS grows %.1f KiB/min after warm-up, bound %.0f", res.RSSSlopeKiBPerMin, cfg.MaxRSSSlopeKiBPerMin)
	}
	if res.Final.Metrics.Kills != 0 {
		t.Errorf("probed_container_kills_total = %d, want 0 (liveness targets are always healthy)", res.Final.Metrics.Kills)
	}
	writeResult(t, cfg.Out, res)
}

func mustDo(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitConverged polls until every live pod's conditions match its targets,
// and fails the test with what still differs at the deadline.
func waitConverged(t *testing.T, c *cluster, timeout time.Duration) []string {
	t.Helper()
	var bad []string
	_ = wait.PollUntilContextTimeout(context.Background(), 3*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if bad, err = c.mismatches(ctx); err != nil {
			t.Logf("listing pods: %v", err)
			return false, nil
		}
		return len(bad) == 0, nil
	})
	if len(bad) > 0 {
		t.Errorf("%d condition mismatches after %v, e.g.:\n%s", len(bad), timeout, strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	return bad
}

func waitWorkers(t *testing.T, p *probedProc, want int, timeout time.Duration) {
	t.Helper()
	var last metricsSample
	eventually(t, fmt.Sprintf("%d workers", want), timeout, func() bool {
		m, err := p.metrics()
		last = m
		return err == nil && m.Workers == want
	}, func() string { return fmt.Sprintf("last: %d workers", last.Workers) })
}

// snapshot is probed's state at rest.
type snapshot struct {
	Proc    procSample    `json:"proc"`
	Metrics metricsSample `json:"metrics"`
}

func (s snapshot) String() string {
	return fmt.Sprintf("workers %d, goroutines %d, fds %d, series %d (%d per-pod), RSS %.1f MiB, heap %.1f MiB",
		s.Metrics.Workers, s.Metrics.Goroutines, s.Proc.FDs, s.Metrics.Series, s.Metrics.PodSeries,
		float64(s.Proc.RSSKiB)/1024, float64(s.Metrics.HeapInuse)/(1<<20))
}

// settle waits until no pod is left in probed and its goroutines, descriptors
// and series are within tolerance of base (if given), and returns that state.
func settle(t *testing.T, p *probedProc, base *snapshot) snapshot {
	t.Helper()
	var s snapshot
	within := func() bool {
		m, err := p.metrics()
		if err != nil || m.Workers != 0 || m.PodSeries != 0 {
			return false
		}
		pr, err := p.procSample()
		if err != nil {
			return false
		}
		prev := s
		s = snapshot{Proc: pr, Metrics: m}
		if base == nil {
			// The baseline: at rest two samples in a row.
			return prev.Metrics.Goroutines == m.Goroutines && prev.Proc.FDs == pr.FDs && prev.Metrics.Series == m.Series
		}
		return m.Series <= base.Metrics.Series &&
			m.Goroutines <= base.Metrics.Goroutines+goroutineTolerance &&
			pr.FDs <= base.Proc.FDs+fdTolerance
	}
	if err := poll(2*time.Second, 3*time.Minute, within); err != nil {
		if base == nil {
			t.Fatalf("probed did not come to rest: %s", s)
		}
		t.Errorf("probed did not return to baseline within 3m:\n  baseline %s\n  now      %s\n(tolerance: workers and series exact, goroutines +%d, fds +%d)",
			base, s, goroutineTolerance, fdTolerance)
	}
	return s
}

// diff lists what a has and b lacks, and the reverse (up to 20 each).
func diff(a, b map[string]bool) (added, removed []string) {
	for k := range a {
		if !b[k] && len(added) < 20 {
			added = append(added, k)
		}
	}
	for k := range b {
		if !a[k] && len(removed) < 20 {
			removed = append(removed, k)
		}
	}
	return added, removed
}

func poll(interval, timeout time.Duration, cond func() bool) error {
	return wait.PollUntilContextTimeout(context.Background(), interval, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool, detail ...func() string) {
	t.Helper()
	if err := poll(time.Second, timeout, cond); err != nil {
		msg := ""
		for _, d := range detail {
			msg += ": " + d()
		}
		t.Fatalf("timed out after %v waiting for %s%s", timeout, what, msg)
	}
}
