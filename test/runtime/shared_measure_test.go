//go:build runtime

package runtimetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/connect"
	"github.com/probed-dev/probed/pkg/cri/decorator"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/worker"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// TestSharedExecMeasure is issue 15's measurement of --exec-share-runs, not
// a pass/fail test: N real containers, each with a liveness and a readiness
// exec probe running the same command at the same period, driven by probed's
// own workers, prober and capped native containerd client. The workers start
// with the kubelet's random phase jitter and keep their phases while sharing
// is switched off and on in alternating windows (off, on, on, off, ...), so
// both modes see the same probe timing. It reports, per mode, the execs that
// really ran (probed_runtime_exec_total), the probes answered, the shares
// (probed_runtime_exec_shared_total) and the node CPU (this process, which
// is the probing process, plus containerd, the shims and all they reaped:
// runc, runc init, the command), per minute, prints a table and writes
// .cache/bench/shared-exec.json. Skipped unless PROBED_SHARE_BENCH=1:
//
//	PROBED_SHARE_BENCH=1 go test -tags runtime -count=1 -timeout 60m -v -run TestSharedExecMeasure ./test/runtime/
//
// Knobs (env): PROBED_SHARE_BENCH_PODS (50), _PERIOD (10s), _WINDOW (1m),
// _ROUNDS (2: off,on,on,off), _WARMUP (period+5s), _IDLE (30s: the node's
// CPU with the containers up and unprobed), _OUT (the JSON file).
func TestSharedExecMeasure(t *testing.T) {
	if os.Getenv("PROBED_SHARE_BENCH") != "1" {
		t.Skip("a measurement of several minutes; set PROBED_SHARE_BENCH=1 to run it")
	}
	h := need(t)
	cfg := shareBenchConfig{
		Pods:    envInt(t, "PROBED_SHARE_BENCH_PODS", 50),
		Period:  envDuration(t, "PROBED_SHARE_BENCH_PERIOD", 10*time.Second),
		Window:  envDuration(t, "PROBED_SHARE_BENCH_WINDOW", time.Minute),
		Rounds:  envInt(t, "PROBED_SHARE_BENCH_ROUNDS", 2),
		Timeout: time.Second,
		Slots:   10, // probed's --max-concurrent-execs default
	}
	cfg.Idle = envDuration(t, "PROBED_SHARE_BENCH_IDLE", 30*time.Second)
	cfg.Warmup = envDuration(t, "PROBED_SHARE_BENCH_WARMUP", cfg.Period+5*time.Second)
	out := os.Getenv("PROBED_SHARE_BENCH_OUT")
	if out == "" {
		out = filepath.Join("..", "..", ".cache", "bench", "shared-exec.json")
	}

	report := shareBenchReport{Config: cfg, Machine: machineInfo(h)}
	t.Logf("starting %d containers", cfg.Pods)
	ids := make([]string, cfg.Pods)
	for i := range ids {
		c := newContainer(t, ctrd.ContainerSpec{Command: []string{"sh", "-c",
			`touch /tmp/healthy; trap "exit 0" TERM; sleep 100000 & wait`}})
		ids[i] = c.RuntimeID()
	}
	// The node's CPU with the containers idle and nothing probing them.
	time.Sleep(5 * time.Second)
	host0, self0, t0 := hostCPU(h), selfCPU(), time.Now()
	time.Sleep(cfg.Idle)
	mins := time.Since(t0).Minutes()
	report.IdleHostPerMin = (hostCPU(h) - host0).Seconds() / mins
	report.IdleSelfPerMin = (selfCPU() - self0).Seconds() / mins
	idle := report.IdleHostPerMin + report.IdleSelfPerMin

	rt, err := connect.New(context.Background(), cri.Options{Endpoint: h.Endpoint(), Type: cri.TypeNative, FIFODir: h.FIFODir()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	for _, v := range []struct{ name, desc string }{
		{"fast", "cat /tmp/healthy"},
		{"slow", "sh -c 'sleep 0.3; cat /tmp/healthy'"},
	} {
		cmd := []string{"cat", "/tmp/healthy"}
		if v.name == "slow" {
			cmd = []string{"sh", "-c", "sleep 0.3; cat /tmp/healthy"}
		}
		vr := runShareVariant(t, h, rt, cfg, ids, cmd, idle)
		vr.Name, vr.Command = v.name, v.desc
		report.Variants = append(report.Variants, vr)
	}
	report.Machine.LoadAvgEnd = loadAvg()

	fmt.Print(report.table())
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(report, "", "  ")
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
	for _, v := range report.Variants {
		if v.Off.Shares != 0 {
			t.Errorf("%s: %v shares with sharing off", v.Name, v.Off.Shares)
		}
		for _, m := range []shareModeResult{v.Off, v.On} {
			if m.Probes == 0 || m.Execs == 0 {
				t.Errorf("%s share=%v: no probes or execs measured: %+v", v.Name, m.Share, m)
			}
		}
	}
}

type shareBenchConfig struct {
	Pods    int           `json:"pods"`
	Period  time.Duration `json:"period_ns"`
	Window  time.Duration `json:"window_ns"`
	Rounds  int           `json:"rounds"`
	Warmup  time.Duration `json:"warmup_ns"`
	Idle    time.Duration `json:"idle_window_ns"`
	Timeout time.Duration `json:"probe_timeout_ns"`
	Slots   int           `json:"max_concurrent_execs"`
}

type shareMachine struct {
	NumCPU       int    `json:"nproc"`
	GoVersion    string `json:"go"`
	Containerd   string `json:"containerd"`
	Runtime      string `json:"runtime"`
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
	Started      string `json:"started"`
}

type shareBenchReport struct {
	Config   shareBenchConfig     `json:"config"`
	Machine  shareMachine         `json:"machine"`
	Variants []shareVariantResult `json:"variants"`
	// The node's CPU per minute with the containers idle, unprobed.
	IdleHostPerMin float64 `json:"idle_runtime_cpu_s_per_min"`
	IdleSelfPerMin float64 `json:"idle_probing_cpu_s_per_min"`
}

type shareVariantResult struct {
	Name    string          `json:"name"`
	Command string          `json:"command"`
	Off     shareModeResult `json:"off"`
	On      shareModeResult `json:"on"`
	// Pairs whose liveness and readiness ticks lie within the mean exec
	// time of each other (folded over the period): those whose runs overlap.
	PairsWithinExec int `json:"pairs_within_mean_exec"`
	// PhaseGapsMS is each container's gap between its two probes' ticks.
	PhaseGapsMS []float64 `json:"phase_gaps_ms"`
	// ExpectedSaving is mean exec time / period: the share of execs saved
	// if phases are uniform and independent.
	ExpectedSaving float64 `json:"expected_saving"`
	// ExecsRatio, CPURatio: on/off, per minute.
	ExecsRatio float64 `json:"execs_ratio_on_off"`
	CPURatio   float64 `json:"node_cpu_ratio_on_off"`
}

type shareModeResult struct {
	Share         bool          `json:"share"`
	Window        time.Duration `json:"window_ns"`
	Execs         float64       `json:"execs"`
	Probes        int64         `json:"probes"`
	ProbeErrors   int64         `json:"probe_errors"`
	ProbeFailures int64         `json:"probe_failures"`
	Shares        float64       `json:"shares"`
	MeanExecMS    float64       `json:"mean_exec_ms"`
	SelfCPU       time.Duration `json:"probing_process_cpu_ns"`
	HostCPU       time.Duration `json:"runtime_cpu_ns"`
	// Per minute.
	ExecsPerMin  float64 `json:"execs_per_min"`
	ProbesPerMin float64 `json:"probes_per_min"`
	SharesPerMin float64 `json:"shares_per_min"`
	CPUsPerMin   float64 `json:"node_cpu_s_per_min"`
	SelfPerMin   float64 `json:"probing_cpu_s_per_min"`
	HostPerMin   float64 `json:"runtime_cpu_s_per_min"`
	// CPUmsPerExec is the node CPU above idle per exec that ran.
	CPUmsPerExec float64 `json:"node_cpu_ms_per_exec_above_idle"`
}

// shareMode is one setting of --exec-share-runs: its own capped runtime
// (so its own exec counters) and its own prober.
type shareMode struct {
	share    bool
	reg      *prometheus.Registry
	p        *prober.Prober
	probes   atomic.Int64
	errs     atomic.Int64
	failures atomic.Int64
}

// switchProber sends every probe to the current mode and notes when each
// worker last probed, for the phase gaps.
type switchProber struct {
	cur  atomic.Pointer[shareMode]
	mu   sync.Mutex
	last map[string]time.Time // by container ID and probe type
}

func (s *switchProber) Probe(ctx context.Context, pt probespec.ProbeType, spec *v1.Probe, tg prober.Target, ev prober.EventSink) (results.Result, string, error) {
	s.mu.Lock()
	s.last[tg.ContainerID+"/"+pt.String()] = time.Now()
	s.mu.Unlock()
	m := s.cur.Load()
	r, out, err := m.p.Probe(ctx, pt, spec, tg, ev)
	m.probes.Add(1)
	switch {
	case err != nil:
		m.errs.Add(1)
	case r != results.Success:
		m.failures.Add(1)
	}
	return r, out, err
}

// runShareVariant runs one liveness and one readiness worker per container,
// both with cmd, and measures the alternating windows.
func runShareVariant(t *testing.T, h *ctrd.Containerd, rt cri.Runtime, cfg shareBenchConfig, ids []string, cmd []string, idle float64) shareVariantResult {
	modes := map[bool]*shareMode{}
	for _, share := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		l := decorator.NewLimited(rt, cfg.Slots, decorator.NewMetrics(reg))
		if share {
			l.ShareIdenticalExecs(clock.RealClock{})
		}
		modes[share] = &shareMode{share: share, reg: reg, p: prober.New(l, prober.Options{})}
	}
	sw := &switchProber{last: map[string]time.Time{}}
	sw.cur.Store(modes[false])

	spec := &v1.Probe{
		ProbeHandler:   v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}},
		TimeoutSeconds: int32(cfg.Timeout / time.Second), PeriodSeconds: int32(cfg.Period / time.Second),
		SuccessThreshold: 1, FailureThreshold: 3,
	}
	pods := &shareBenchPods{pods: map[types.UID]*v1.Pod{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var workers []*worker.Worker
	wreg := prometheus.NewRegistry()
	wm := worker.NewMetrics(wreg)
	start := time.Now() // workers created now wait a random part of a period, as in the kubelet
	for _, pt := range []probespec.ProbeType{probespec.Liveness, probespec.Readiness} {
		rm := results.NewManager()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-rm.Updates():
					_ = rm.Drain()
				}
			}
		}()
		for i, id := range ids {
			pod := pods.get(i, id, spec)
			w := worker.New(worker.Config{
				PodUID: pod.UID, PodNamespace: pod.Namespace, PodName: pod.Name,
				Container: &pod.Spec.Containers[0], ProbeType: pt, Spec: spec,
				Prober: sw, Pods: pods, Results: rm, DaemonStart: start, Metrics: wm,
			})
			workers = append(workers, w)
			go w.Run(ctx)
		}
	}
	defer func() {
		for _, w := range workers {
			w.Stop()
		}
		for _, w := range workers {
			<-w.Done()
		}
	}()
	t.Logf("%q: %d workers, warming up %v", strings.Join(cmd, " "), len(workers), cfg.Warmup)
	time.Sleep(cfg.Warmup)

	var res shareVariantResult
	res.Off.Share, res.On.Share = false, true
	for round := 0; round < cfg.Rounds; round++ {
		order := []bool{false, true}
		if round%2 == 1 {
			order = []bool{true, false}
		}
		for _, share := range order {
			m := modes[share]
			acc := &res.Off
			if share {
				acc = &res.On
			}
			execs0, shares0 := execCount(t, m.reg), metricSum(t, m.reg, "probed_runtime_exec_shared_total")
			probes0, errs0, fails0 := m.probes.Load(), m.errs.Load(), m.failures.Load()
			sw.cur.Store(m)
			host0, self0, t0 := hostCPU(h), selfCPU(), time.Now()
			time.Sleep(cfg.Window)
			host, self, took := hostCPU(h)-host0, selfCPU()-self0, time.Since(t0)
			// Execs started in this window may still finish under this mode's
			// counters: they belong to it, so read them a moment after.
			sw.cur.Store(modes[!share])
			time.Sleep(cfg.Timeout)
			acc.Window += took
			acc.HostCPU += host
			acc.SelfCPU += self
			acc.Execs += execCount(t, m.reg) - execs0
			acc.Shares += metricSum(t, m.reg, "probed_runtime_exec_shared_total") - shares0
			acc.Probes += m.probes.Load() - probes0
			acc.ProbeErrors += m.errs.Load() - errs0
			acc.ProbeFailures += m.failures.Load() - fails0
			t.Logf("round %d share=%v: %v execs, %v shares, host %v self %v in %v", round, share,
				execCount(t, m.reg)-execs0, metricSum(t, m.reg, "probed_runtime_exec_shared_total")-shares0, host, self, took.Round(time.Millisecond))
		}
	}
	for share, acc := range map[bool]*shareModeResult{false: &res.Off, true: &res.On} {
		acc.MeanExecMS = meanExecMS(t, modes[share].reg)
		acc.finish(idle)
	}
	if res.Off.ExecsPerMin > 0 {
		res.ExecsRatio = res.On.ExecsPerMin / res.Off.ExecsPerMin
	}
	if res.Off.CPUsPerMin > 0 {
		res.CPURatio = res.On.CPUsPerMin / res.Off.CPUsPerMin
	}
	d := res.Off.MeanExecMS
	res.ExpectedSaving = d / float64(cfg.Period.Milliseconds())
	sw.mu.Lock()
	for _, id := range ids {
		l, r := sw.last[id+"/"+probespec.Liveness.String()], sw.last[id+"/"+probespec.Readiness.String()]
		gap := (l.Sub(r) % cfg.Period).Abs()
		gap = min(gap, cfg.Period-gap)
		g := float64(gap.Microseconds()) / 1e3
		res.PhaseGapsMS = append(res.PhaseGapsMS, g)
		if g < d {
			res.PairsWithinExec++
		}
	}
	sw.mu.Unlock()
	return res
}

func (m *shareModeResult) finish(idle float64) {
	mins := m.Window.Minutes()
	if mins == 0 {
		return
	}
	m.ExecsPerMin = m.Execs / mins
	m.ProbesPerMin = float64(m.Probes) / mins
	m.SharesPerMin = m.Shares / mins
	m.SelfPerMin = m.SelfCPU.Seconds() / mins
	m.HostPerMin = m.HostCPU.Seconds() / mins
	m.CPUsPerMin = m.SelfPerMin + m.HostPerMin
	if m.ExecsPerMin > 0 {
		m.CPUmsPerExec = 1e3 * (m.CPUsPerMin - idle) / m.ExecsPerMin
	}
}

func (r shareBenchReport) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n--exec-share-runs: %d containers x (liveness + readiness, same command), period %v, timeout %v, %d x %v per mode; nproc %d, load %s -> %s\n",
		r.Config.Pods, r.Config.Period, r.Config.Timeout, r.Config.Rounds, r.Config.Window, r.Machine.NumCPU, r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd)
	fmt.Fprintf(&b, "idle (containers up, nothing probing): node cpu %.2f s/min (probing process %.2f, runtime %.2f)\n",
		r.IdleHostPerMin+r.IdleSelfPerMin, r.IdleSelfPerMin, r.IdleHostPerMin)
	fmt.Fprintf(&b, "%-5s %-5s %10s %10s %10s %10s %14s %14s %14s %14s\n", "cmd", "share", "execs/min", "probes/min", "shares/min", "exec ms", "node cpu s/min", "probing s/min", "runtime s/min", "cpu ms/exec*")
	for _, v := range r.Variants {
		for _, m := range []shareModeResult{v.Off, v.On} {
			s := "off"
			if m.Share {
				s = "on"
			}
			fmt.Fprintf(&b, "%-5s %-5s %10.1f %10.1f %10.1f %10.1f %14.2f %14.2f %14.2f %14.1f\n", v.Name, s, m.ExecsPerMin, m.ProbesPerMin, m.SharesPerMin, m.MeanExecMS, m.CPUsPerMin, m.SelfPerMin, m.HostPerMin, m.CPUmsPerExec)
		}
		fmt.Fprintf(&b, "%-5s on/off: execs %.3fx, node cpu %.3fx; pairs within one exec time %d/%d; expected saving (exec time/period) %.1f%%; probe errors %d/%d, failures %d/%d\n",
			v.Name, v.ExecsRatio, v.CPURatio, v.PairsWithinExec, len(v.PhaseGapsMS), 100*v.ExpectedSaving,
			v.Off.ProbeErrors, v.On.ProbeErrors, v.Off.ProbeFailures, v.On.ProbeFailures)
	}
	b.WriteString("* node CPU above idle, per exec that ran\n")
	return b.String()
}

// shareBenchPods is the informer-cache stand-in: one running pod per
// container, started an hour ago.
type shareBenchPods struct {
	mu   sync.RWMutex
	pods map[types.UID]*v1.Pod
}

func (c *shareBenchPods) Pod(uid types.UID) (*v1.Pod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p, ok := c.pods[uid]
	return p, ok
}

func (c *shareBenchPods) get(i int, containerID string, spec *v1.Probe) *v1.Pod {
	uid := types.UID(fmt.Sprintf("share-%04d", i))
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pods[uid]; ok {
		return p
	}
	started := true
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("share-%d", i), Namespace: "bench", UID: uid},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "app", Image: "busybox", LivenessProbe: spec, ReadinessProbe: spec,
		}}},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, PodIP: "127.0.0.1",
			ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", Ready: true, Started: &started, ContainerID: containerID,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}},
			}},
		},
	}
	c.pods[uid] = p
	return p
}

// series gathers reg and returns the series of the metric family name.
func series(t *testing.T, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.Metric
		}
	}
	return nil
}

// execCount is every exec that reached the runtime (all outcomes but
// queue_timeout, which never ran).
func execCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	var n float64
	for _, m := range series(t, reg, "probed_runtime_exec_total") {
		queued := false
		for _, lp := range m.Label {
			if lp.GetName() == "outcome" && lp.GetValue() == decorator.OutcomeQueueTimeout {
				queued = true
			}
		}
		if !queued {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// metricSum adds up every series of a counter.
func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	var n float64
	for _, m := range series(t, reg, name) {
		n += m.GetCounter().GetValue()
	}
	return n
}

// meanExecMS is the mean time an exec spent in the runtime, over the run.
func meanExecMS(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	var sum float64
	var n uint64
	for _, m := range series(t, reg, "probed_runtime_exec_duration_seconds") {
		sum += m.GetHistogram().GetSampleSum()
		n += m.GetHistogram().GetSampleCount()
	}
	if n == 0 {
		return 0
	}
	return 1e3 * sum / float64(n)
}

func machineInfo(h *ctrd.Containerd) shareMachine {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, _ := h.Version(ctx)
	return shareMachine{
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), Containerd: v,
		Runtime: cri.TypeNative, LoadAvgStart: loadAvg(), Started: time.Now().UTC().Format(time.RFC3339),
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, s)
	}
	return v
}
