package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/probed-dev/probed/test/bench/benchkit"
)

// Results is results.json.
type Results struct {
	Generated string   `json:"generated"`
	Env       Env      `json:"env"`
	Config    config   `json:"config"`
	Notes     []string `json:"notes"`
	Rows      []Row    `json:"rows"`
	Profiles  bool     `json:"profiles"`
	Raw       *Raw     `json:"raw"`
}

// Env describes the machine and how busy it was.
type Env struct {
	GoVersion     string  `json:"go_version"`
	CPU           string  `json:"cpu"`
	NumCPU        int     `json:"num_cpu"`
	Kernel        string  `json:"kernel"`
	Taskset       bool    `json:"taskset"`
	Netns         bool    `json:"netns"`
	LoadAvgBefore string  `json:"loadavg_before"`
	LoadAvgAfter  string  `json:"loadavg_after"`
	TotalS        float64 `json:"total_s"`
}

// Raw holds every run's own output.
type Raw struct {
	Net   []NetRun             `json:"net"`
	TW    []TWRun              `json:"time_wait"`
	Sched []SchedRun           `json:"sched"`
	Exec  *benchkit.ExecResult `json:"exec,omitempty"`
	API   []APIRun             `json:"api,omitempty"`
	// OptIn and OptInTW are probed's opt-in modes (keep-alive, rst close).
	OptIn   []NetRun `json:"optin,omitempty"`
	OptInTW []TWRun  `json:"optin_tw,omitempty"`
	// SubSecond is probed's sched at a 100 ms period (periodMilliseconds)
	// beside its 1 s baseline of the same run; the kubelet cannot do it.
	SubSecond []SchedRun `json:"subsecond,omitempty"`
}

type NetRun struct {
	Rep int `json:"rep"`
	benchkit.NetResult
}

type TWRun struct {
	Rep int `json:"rep"`
	benchkit.RateResult
	TW twCount `json:"tw"`
}

type SchedRun struct {
	Rep int `json:"rep"`
	benchkit.SchedResult
}

// Agg is a figure over the repetitions.
type Agg struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"`
}

func aggregate(v []float64) *Agg {
	if len(v) == 0 {
		return nil
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return &Agg{Median: m, Min: s[0], Max: s[len(s)-1], Values: v}
}

// Row is one line of the table. For the exec figure "probed" is the native
// containerd path and "kubelet" the CRI ExecSync path.
type Row struct {
	Figure  string `json:"figure"`
	Metric  string `json:"metric"`
	Unit    string `json:"unit"`
	Probed  *Agg   `json:"probed,omitempty"`
	Kubelet *Agg   `json:"kubelet,omitempty"`
	// Ratio is probed/kubelet per repetition (same run), then aggregated.
	Ratio  *Agg   `json:"ratio,omitempty"`
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	Note   string `json:"note,omitempty"`
}

// pairs collects a value per repetition for each side.
type pairs struct {
	p, k map[int]float64
}

func newPairs() *pairs { return &pairs{p: map[int]float64{}, k: map[int]float64{}} }

func (ps *pairs) add(impl string, rep int, v float64) {
	if impl == "probed" || impl == "containerd" {
		ps.p[rep] = v
	} else {
		ps.k[rep] = v
	}
}

// row aggregates both sides and the same-repetition ratios.
func (ps *pairs) row(fig, metric, unit string) Row {
	var pv, kv, rv []float64
	reps := map[int]bool{}
	for r := range ps.p {
		reps[r] = true
	}
	for r := range ps.k {
		reps[r] = true
	}
	keys := make([]int, 0, len(reps))
	for r := range reps {
		keys = append(keys, r)
	}
	sort.Ints(keys)
	for _, r := range keys {
		p, okp := ps.p[r]
		k, okk := ps.k[r]
		if okp {
			pv = append(pv, p)
		}
		if okk {
			kv = append(kv, k)
		}
		if okp && okk && k != 0 {
			rv = append(rv, p/k)
		}
	}
	return Row{Figure: fig, Metric: metric, Unit: unit, Probed: aggregate(pv), Kubelet: aggregate(kv), Ratio: aggregate(rv)}
}

func boolp(b bool) *bool { return &b }

// ratioAtMost sets the target "probed/kubelet <= x" and whether the median ratio meets it.
func (r Row) ratioAtMost(x float64) Row {
	r.Target = fmt.Sprintf("≤ %g×", x)
	if r.Ratio != nil {
		r.Met = boolp(r.Ratio.Median <= x)
	}
	return r
}

func (r Row) ratioAtLeast(x float64) Row {
	r.Target = fmt.Sprintf("≥ %g×", x)
	if r.Ratio != nil {
		r.Met = boolp(r.Ratio.Median >= x)
	}
	return r
}

// probedAtMost sets an absolute target on probed's median.
func (r Row) probedAtMost(x float64, text string) Row {
	r.Target = text
	if r.Probed != nil {
		r.Met = boolp(r.Probed.Median <= x)
	}
	return r
}

var protoName = map[string]string{"http": "HTTP", "tcp": "TCP", "grpc": "gRPC"}

func buildRows(res *Results) []Row {
	var rows []Row
	raw := res.Raw
	protos := []string{"http", "tcp", "grpc"}

	netPairs := func(f func(r *benchkit.NetResult) float64, proto string) *pairs {
		ps := newPairs()
		for i := range raw.Net {
			r := &raw.Net[i]
			if r.Proto == proto {
				ps.add(r.Impl, r.Rep, f(&r.NetResult))
			}
		}
		return ps
	}
	if len(raw.Net) > 0 {
		cpuTarget := map[string]float64{"http": 0.6, "tcp": 0.6, "grpc": 0.35}
		for _, p := range protos {
			rows = append(rows, netPairs(func(r *benchkit.NetResult) float64 { return r.Sat.CPUPerProbeUS }, p).
				row("1. CPU per probe at saturation (user+sys)", protoName[p], "µs").ratioAtMost(cpuTarget[p]))
		}
		for _, p := range protos {
			r := netPairs(func(r *benchkit.NetResult) float64 { return r.Sat.ProbesPerSec }, p).
				row("2. Max sustained probes/s, one core", protoName[p], "probes/s")
			util := netPairs(func(r *benchkit.NetResult) float64 { return r.Sat.Util }, p).row("", "", "")
			if util.Probed != nil && util.Kubelet != nil {
				r.Note = fmt.Sprintf("prober core busy %.0f%% / %.0f%% of wall time (below ~90%%: the target or other load was the limit)",
					100*util.Probed.Median, 100*util.Kubelet.Median)
			}
			if p == "tcp" {
				r = r.ratioAtLeast(3)
			}
			rows = append(rows, r)
		}
		for _, p := range protos {
			r := netPairs(func(r *benchkit.NetResult) float64 {
				if r.Sat.CPUPerProbeUS == 0 {
					return 0
				}
				return 1e6 / r.Sat.CPUPerProbeUS
			}, p).row("2. Probes per prober CPU-second (1 / figure 1)", protoName[p], "probes/s")
			if p == "tcp" {
				r = r.ratioAtLeast(3)
				r.Note = "the same target read as capacity: not limited by the target's core"
			}
			rows = append(rows, r)
		}
		allocTarget := map[string]float64{"http": 0.25, "grpc": 0.2}
		bytesTarget := map[string]float64{"http": 0.15}
		for _, p := range protos {
			r := netPairs(func(r *benchkit.NetResult) float64 { return r.Allocs.AllocsPerProbe }, p).
				row("3. Allocations per probe", protoName[p], "allocs")
			if t, ok := allocTarget[p]; ok {
				r = r.ratioAtMost(t)
			}
			rows = append(rows, r)
			r = netPairs(func(r *benchkit.NetResult) float64 { return r.Allocs.BytesPerProbe }, p).
				row("3. Bytes allocated per probe", protoName[p], "B")
			if t, ok := bytesTarget[p]; ok {
				r = r.ratioAtMost(t)
			}
			rows = append(rows, r)
		}
		p99Target := map[string]float64{"http": 0.7, "tcp": 0.3}
		for _, p := range protos {
			rate := res.Config.NetLatRate
			rows = append(rows, netPairs(func(r *benchkit.NetResult) float64 { return r.Lat.Stats.P50US }, p).
				row(fmt.Sprintf("4. Latency p50 at %g probes/s", rate), protoName[p], "µs"))
			r := netPairs(func(r *benchkit.NetResult) float64 { return r.Lat.Stats.P99US }, p).
				row(fmt.Sprintf("4. Latency p99 at %g probes/s", rate), protoName[p], "µs")
			if t, ok := p99Target[p]; ok {
				r = r.ratioAtMost(t)
			}
			rows = append(rows, r)
		}
	}

	if len(raw.TW) > 0 {
		for _, p := range protos {
			ps, ss := newPairs(), newPairs()
			sent, rate := 0, 0.0
			for _, r := range raw.TW {
				if r.Proto == p {
					ps.add(r.Impl, r.Rep, float64(r.TW.ProberSide))
					ss.add(r.Impl, r.Rep, float64(r.TW.ServerSide))
					sent, rate = r.Sent, r.Rate
				}
			}
			if sent == 0 {
				continue
			}
			fig := fmt.Sprintf("5. TIME_WAIT after %gs at %g probes/s", res.Config.TWDur.Seconds(), rate)
			r := ps.row(fig, protoName[p]+" prober side", "sockets")
			if p == "http" {
				// "≈ 0": at most 1% of the connections made.
				r = r.probedAtMost(float64(sent)/100, fmt.Sprintf("≈ 0 (≤ 1%% of %d)", sent))
			}
			rows = append(rows, r)
			rows = append(rows, ss.row(fig, protoName[p]+" server side", "sockets"))
		}
	}

	if raw.Exec != nil && raw.Exec.Available {
		rates := []float64{}
		seen := map[float64]bool{}
		for _, r := range raw.Exec.Runs {
			if !seen[r.Rate] {
				seen[r.Rate] = true
				rates = append(rates, r.Rate)
			}
		}
		total := func(r benchkit.ExecRun) float64 { return r.HostCPUmsPerExec + r.SelfCPUmsPerExec }
		for _, rate := range rates {
			// probed's side is impl's runs, the kubelet's the CRI runs (its path).
			mk := func(impl string, f func(r benchkit.ExecRun) float64) *pairs {
				ps := newPairs()
				for _, r := range raw.Exec.Runs {
					switch {
					case r.Rate != rate:
					case r.Impl == impl:
						ps.add("probed", r.Rep, f(r))
					case r.Impl == "cri":
						ps.add("kubelet", r.Rep, f(r))
					}
				}
				return ps
			}
			// Figure 6 is probed's default on containerd; 6b the native client
			// alone, which streams output but costs probed more CPU.
			for _, side := range []struct {
				impl, fig string
				gated     bool
			}{
				{"containerd-cri", "6. Exec, containerd-cri (probed's default) vs CRI ExecSync (the kubelet's)", true},
				{"containerd", "6b. Exec, native containerd client vs CRI ExecSync", false},
			} {
				fig := fmt.Sprintf("%s, %g/s", side.fig, rate)
				if len(mk(side.impl, total).p) == 0 {
					continue // a results.json from before containerd-cri
				}
				p99 := mk(side.impl, func(r benchkit.ExecRun) float64 { return r.Lat.P99US / 1e3 }).row(fig, "latency p99", "ms")
				host := mk(side.impl, func(r benchkit.ExecRun) float64 { return r.HostCPUmsPerExec }).row(fig, "runtime CPU per exec (containerd+shims+runc)", "ms")
				self := mk(side.impl, func(r benchkit.ExecRun) float64 { return r.SelfCPUmsPerExec }).row(fig, "probed's own CPU per exec", "ms")
				tot := mk(side.impl, total).row(fig, "node CPU per exec (runtime + probed)", "ms")
				if side.gated {
					p99, host, self, tot = p99.ratioAtMost(1), host.ratioAtMost(1.1), self.ratioAtMost(1.1), tot.ratioAtMost(1)
				}
				rows = append(rows, mk(side.impl, func(r benchkit.ExecRun) float64 { return r.Lat.P50US / 1e3 }).row(fig, "latency p50", "ms"))
				rows = append(rows, p99, host, self, tot)
			}
		}
	}

	if len(raw.Sched) > 0 {
		ns := []int{}
		seen := map[int]bool{}
		for _, r := range raw.Sched {
			if !seen[r.Workers] {
				seen[r.Workers] = true
				ns = append(ns, r.Workers)
			}
		}
		sort.Ints(ns)
		for _, n := range ns {
			mk := func(f func(r *benchkit.SchedResult) float64) *pairs {
				ps := newPairs()
				for i := range raw.Sched {
					if raw.Sched[i].Workers == n {
						ps.add(raw.Sched[i].Impl, raw.Sched[i].Rep, f(&raw.Sched[i].SchedResult))
					}
				}
				return ps
			}
			fig := fmt.Sprintf("7. Scheduling, %d workers, period %gs", n, res.Config.SchedPeriod.Seconds())
			rows = append(rows, mk(func(r *benchkit.SchedResult) float64 { return r.Lateness.P50US / 1e3 }).row(fig, "lateness p50", "ms"))
			p99 := mk(func(r *benchkit.SchedResult) float64 { return r.Lateness.P99US / 1e3 }).row(fig, "lateness p99", "ms")
			mx := mk(func(r *benchkit.SchedResult) float64 { return r.Lateness.MaxUS / 1e3 }).row(fig, "lateness max", "ms")
			if n >= 10000 {
				p99 = p99.probedAtMost(1.5, "≤ 1.5 ms")
				mx = mx.probedAtMost(5, "≤ 5 ms")
			}
			rows = append(rows, p99, mx)
			cpu := mk(func(r *benchkit.SchedResult) float64 { return r.CPUmsPerSec }).row(fig, "process CPU per second, idle", "ms/s")
			if n >= 50000 {
				cpu = cpu.ratioAtMost(0.5)
			} else {
				cpu = cpu.ratioAtMost(0.75)
			}
			rows = append(rows, cpu)
			rows = append(rows, mk(func(r *benchkit.SchedResult) float64 { return r.MemPerWorkerB }).row(fig, "memory per idle worker (live heap + stacks)", "B").ratioAtMost(0.75))
			rows = append(rows, mk(func(r *benchkit.SchedResult) float64 { return r.RSSPerWorkerB }).row(fig, "RSS per idle worker", "B"))
			rows = append(rows, mk(func(r *benchkit.SchedResult) float64 { return r.AllocsPerTick }).row(fig, "heap allocations per tick (whole process)", "allocs"))
			seen := mk(func(r *benchkit.SchedResult) float64 {
				if r.Expected == 0 {
					return 0
				}
				return 100 * float64(r.Ticks) / float64(r.Expected)
			}).row(fig, "ticks seen in the window / period's promise", "%")
			seen.Ratio = nil
			seen.Note = "below 100: ticks dropped (a worker late by more than a period); above: a backlog from before the window"
			rows = append(rows, seen)
		}
	}
	rows = append(rows, optinRows(raw)...)
	rows = append(rows, apiRows(raw.API)...)
	return rows
}

func writeOutputs(dir string, res *Results) error {
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	for name, svg := range charts(res) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme(res)), 0o644)
}

// rerender rebuilds rows, README.md and charts from results.json.
func rerender(args []string) error {
	dir := "docs/benchmarks"
	if len(args) > 0 {
		dir = args[0]
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return err
	}
	res.Rows = buildRows(&res)
	return writeOutputs(dir, &res)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
