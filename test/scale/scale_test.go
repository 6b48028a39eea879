//go:build scale

package scale

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/test/scale/apiload"
)

// TestScale sets up the fleet, then measures the steady state (and fails if
// anyone writes while nothing changes), then runs cfg.Phases in a fixed
// order: readiness transitions, liveness kills, the event storm, a rolling
// restart of every probed (fails on any condition flip) and an apiserver
// restart. The figures go to cfg.Out as JSON and to the log.
func TestScale(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := &result{Config: cfg, Started: time.Now().UTC()}
	res.ControlPlaneIdle = apiload.ReadUsage(cp.RunDir).RSSMiB

	k := newKubelet(client)
	f := &fleet{t: t, ctx: ctx, k: k}
	dir := t.TempDir()
	for i := range cfg.Nodes {
		n, err := newNode(ctx, t, k, i, dir)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		f.nodes = append(f.nodes, n)
	}
	if err := k.run(ctx, 8); err != nil {
		t.Fatal(err)
	}
	setupStart := time.Now()
	for _, n := range f.nodes {
		if err := n.startProbed(cfg.ProbedFlags); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { f.stopAll() })
	if err := f.parallelNodes(8, func(n *simNode) error { return n.Probed.waitReady(ctx, 2*time.Minute) }); err != nil {
		t.Fatal(err)
	}
	if err := f.parallelNodes(4, func(n *simNode) error { return n.createPods(ctx, k, cfg.Pods) }); err != nil {
		t.Fatal(err)
	}
	f.waitPods("every pod Ready through probed's gate", nil, 10*time.Minute, readyIs(v1.ConditionTrue))
	res.SetupSeconds = time.Since(setupStart).Seconds()
	f.settle(5*time.Second, 2*time.Minute)
	t.Logf("set-up: %d nodes × %d pods Ready in %.0fs", cfg.Nodes, cfg.Pods, res.SetupSeconds)

	// Steady state: nothing changes, so nobody may write.
	flips0 := k.flips.Load()
	res.Steady = f.measure(func() { time.Sleep(cfg.Steady) })
	res.Steady.Flips = k.flips.Load() - flips0
	res.ProbedRSSMiB = f.probedRSS()
	res.steadyFigures(cfg)
	t.Logf("steady state over %v:%s", cfg.Steady, res.Steady.delta)
	if w := res.Steady.delta.Writes("probed"); w != 0 {
		t.Errorf("steady state: probed wrote %g times (pod status and events) in %v; want 0", w, cfg.Steady)
	}
	if w := res.Steady.delta.Writes("kubelet"); w != 0 {
		t.Errorf("steady state: the stand-in kubelet wrote %g times in %v; want 0 (something flipped a condition)", w, cfg.Steady)
	}

	if cfg.Phases["transitions"] {
		res.Transitions = f.transitions(cfg)
	}
	if cfg.Phases["kills"] {
		res.Kills = f.kills(cfg)
	}
	if cfg.Phases["storm"] {
		res.Storm = f.storm(cfg)
	}
	if cfg.Phases["restart"] {
		res.Restart = f.rollingRestart(cfg)
		if res.Restart.Flips != 0 {
			t.Errorf("rolling restart of %d probed: %d condition flips; want 0", cfg.Nodes, res.Restart.Flips)
		}
	}
	if cfg.Phases["apiserver"] {
		res.APIServer = f.apiserverRestart(cfg)
	}
	res.KubeletWriteErrors = k.writeErrors.Load()
	res.write(t, cfg.Out)
}

// stopAll stops every probed with SIGTERM and checks each exited cleanly.
func (f *fleet) stopAll() {
	_ = f.parallelNodes(8, func(n *simNode) error {
		if n.Probed == nil {
			return nil
		}
		if err := n.Probed.Stop(30 * time.Second); err != nil {
			f.t.Errorf("%s: %v", n.Name, err)
		}
		if _, err := n.Probed.Exited(); err != nil {
			f.t.Errorf("%s: probed exited with %v after SIGTERM", n.Name, err)
		}
		return nil
	})
}

func (r *result) write(t *testing.T, path string) {
	r.Finished = time.Now().UTC()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("result written to %s:\n%s", path, b)
}
