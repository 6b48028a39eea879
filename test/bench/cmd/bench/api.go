package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// APIRun is one TestFlipLatency run on the integration tier's real
// kube-apiserver (figure 8): its JSON line, as the test writes it.
type APIRun struct {
	Rep                 int                `json:"rep"`
	Transitions         int                `json:"transitions"`
	StatusWrites        float64            `json:"status_writes"`
	FailedWrites        float64            `json:"failed_writes"`
	WritesPerTransition float64            `json:"writes_per_transition"`
	PeriodSeconds       float64            `json:"period_seconds"`
	FailureThreshold    int                `json:"failure_threshold"`
	LatencyMS           map[string]float64 `json:"latency_ms"`
	TargetP99MS         float64            `json:"target_p99_ms"`
}

// runAPI runs the integration tier's TestFlipLatency (a real etcd and
// kube-apiserver, probed built without the race detector) once per
// repetition, in one go test process.
func (b *bench) runAPI() error {
	out := filepath.Join(b.out, "profiles", "api-flips.jsonl")
	_ = os.Remove(out)
	cmd := exec.Command("go", "test", "-count="+strconv.Itoa(b.cfg.Reps), "-tags", "integration",
		"-run", "^TestFlipLatency$", "-timeout", "20m", "./test/integration/")
	cmd.Dir = b.repo
	cmd.Env = append(os.Environ(), "FLIP_OUT="+out, "PROBED_NO_RACE=1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("TestFlipLatency: %w", err)
	}
	f, err := os.Open(out)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for rep := 0; sc.Scan(); rep++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r APIRun
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return fmt.Errorf("%s: %w", out, err)
		}
		r.Rep = rep
		b.res.Raw.API = append(b.res.Raw.API, r)
	}
	return sc.Err()
}

// apiRows are figure 8's rows: probed only, against absolute targets.
func apiRows(runs []APIRun) []Row {
	if len(runs) == 0 {
		return nil
	}
	pick := func(f func(APIRun) float64) *pairs {
		ps := newPairs()
		for _, r := range runs {
			ps.add("probed", r.Rep, f(r))
		}
		return ps
	}
	r0 := runs[0]
	fig := fmt.Sprintf("8. API, real kube-apiserver: %d readiness transitions per run, periodSeconds %g, thresholds %d", r0.Transitions, r0.PeriodSeconds, r0.FailureThreshold)
	bound := r0.PeriodSeconds*1000*float64(r0.FailureThreshold) + 100
	writes := pick(func(r APIRun) float64 { return r.WritesPerTransition }).row(fig, "status writes per transition", "writes")
	writes.Target = "exactly 1"
	if writes.Probed != nil {
		writes.Met = boolp(writes.Probed.Min == 1 && writes.Probed.Max == 1)
	}
	return []Row{
		writes,
		pick(func(r APIRun) float64 { return r.LatencyMS["p50"] }).row(fig, "target flip → condition flip p50", "ms"),
		pick(func(r APIRun) float64 { return r.LatencyMS["p99"] }).row(fig, "target flip → condition flip p99", "ms").
			probedAtMost(bound, fmt.Sprintf("≤ %g ms", bound)),
	}
}
