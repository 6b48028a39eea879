// Command bench is the orchestrator of issue 6's benchmarks: probed's
// pkg/prober and pkg/worker against the kubelet's real probing code, on the
// same loopback targets, every figure repeated, with medians, spreads and
// same-run ratios. hack/bench.sh builds the binaries and runs it:
//
//	bench -bin DIR -repo ROOT -out docs/benchmarks [-quick]
//
// It writes results.json, README.md, SVG charts and pprof summaries to -out.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/probed-dev/probed/test/bench/benchkit"
)

// config is every knob of one bench run.
type config struct {
	Quick bool `json:"quick"`
	Reps  int  `json:"reps"`

	SchedWorkers []int         `json:"sched_workers"`
	SchedPeriod  time.Duration `json:"sched_period_ns"`
	SchedWarmup  time.Duration `json:"sched_warmup_ns"`
	SchedWindow  time.Duration `json:"sched_window_ns"`

	NetAllocN  int           `json:"net_alloc_n"`
	NetSatDur  time.Duration `json:"net_sat_dur_ns"`
	NetSatConc int           `json:"net_sat_conc"`
	NetLatRate float64       `json:"net_lat_rate"`
	NetLatDur  time.Duration `json:"net_lat_dur_ns"`

	TWRate     float64       `json:"tw_rate"`
	TWRateGRPC float64       `json:"tw_rate_grpc"`
	TWDur      time.Duration `json:"tw_dur_ns"`

	ExecRates string `json:"exec_rates"`
	ExecDurs  string `json:"exec_durs"`

	Profile bool `json:"profile"`
}

func fullConfig() config {
	return config{
		Reps:         3,
		SchedWorkers: []int{1000, 10000, 50000},
		SchedPeriod:  time.Second,
		SchedWarmup:  3 * time.Second,
		SchedWindow:  7 * time.Second,
		NetAllocN:    1000,
		NetSatDur:    3 * time.Second,
		NetSatConc:   16,
		NetLatRate:   200,
		NetLatDur:    5 * time.Second,
		TWRate:       1000,
		TWRateGRPC:   200,
		TWDur:        20 * time.Second,
		ExecRates:    "1,5,20",
		ExecDurs:     "10s,6s,5s",
		Profile:      true,
	}
}

func quickConfig() config {
	c := fullConfig()
	c.Quick = true
	c.Reps = 1
	c.SchedWarmup, c.SchedWindow = 2*time.Second, 4*time.Second
	c.NetAllocN, c.NetSatDur, c.NetLatDur = 300, 1500*time.Millisecond, 3*time.Second
	c.SchedWorkers = []int{1000, 10000}
	c.SchedWarmup, c.SchedWindow = 2*time.Second, 3*time.Second
	c.TWDur = 4 * time.Second
	c.ExecDurs = "3s,2s,2s"
	c.Profile = false
	return c
}

type bench struct {
	cfg    config
	self   string
	bin    string
	repo   string
	out    string
	netns  bool
	pin    bool
	res    *Results
	impls  []string
	protos []string
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "netns-run":
			if err := netnsRun(); err != nil {
				fmt.Fprintln(os.Stderr, "netns-run:", err)
				os.Exit(1)
			}
			return
		case "netns-probe":
			if err := netnsProbe(); err != nil {
				os.Exit(1)
			}
			return
		case "report":
			// Re-render README.md and the charts from an existing results.json.
			if err := rerender(os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "report:", err)
				os.Exit(1)
			}
			return
		}
	}
	bin := flag.String("bin", ".cache/bench/bin", "directory with target, probed-driver, kubelet-driver")
	repo := flag.String("repo", ".", "repository root")
	out := flag.String("out", "docs/benchmarks", "output directory")
	quick := flag.Bool("quick", false, "a 2-3 minute smoke: one repetition, short runs")
	merge := flag.Bool("merge", false, "keep the other phases' results from the output directory's results.json and redo only -only's")
	only := flag.String("only", "", "comma-separated phases to run (sched,subsec,net,tw,exec,profile,optin,api); default all")
	flag.Parse()

	cfg := fullConfig()
	if *quick {
		cfg = quickConfig()
	}
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	b := &bench{cfg: cfg, self: self, bin: abs(*bin), repo: abs(*repo), out: abs(*out),
		impls: []string{"probed", "kubelet"}, protos: []string{"http", "tcp", "grpc"}}
	if err := os.MkdirAll(filepath.Join(b.out, "profiles"), 0o755); err != nil {
		fatal(err)
	}
	b.res = &Results{Config: cfg, Raw: &Raw{}}
	if *merge {
		prev, err := os.ReadFile(filepath.Join(b.out, "results.json"))
		if err != nil {
			fatal(err)
		}
		var old Results
		if err := json.Unmarshal(prev, &old); err != nil {
			fatal(err)
		}
		if old.Raw != nil {
			b.res.Raw = old.Raw
		}
		b.res.Config, b.res.Profiles = old.Config, old.Profiles
		b.res.Notes = append(old.Notes, "phases "+*only+" re-run at "+time.Now().UTC().Format(time.RFC3339)+" (-merge)")
	}
	b.env()
	phases := map[string]bool{"sched": true, "subsec": true, "net": true, "tw": true, "exec": true, "profile": cfg.Profile, "optin": true, "api": true}
	if *only != "" {
		phases = map[string]bool{}
		for _, p := range strings.Split(*only, ",") {
			phases[p] = true
		}
	}
	start := time.Now()
	steps := []struct {
		name string
		f    func() error
	}{
		{"sched", b.runSched},
		{"subsec", b.runSubSecond},
		{"net", b.runNet},
		{"tw", b.runTW},
		{"exec", b.runExec},
		{"profile", b.runProfiles},
		{"optin", b.runOptIn},
		{"api", b.runAPI},
	}
	for _, s := range steps {
		if !phases[s.name] {
			continue
		}
		t := time.Now()
		resetRaw(b.res.Raw, s.name)
		logf("== %s", s.name)
		if err := s.f(); err != nil {
			b.res.Notes = append(b.res.Notes, fmt.Sprintf("phase %s failed: %v", s.name, err))
			logf("phase %s failed: %v", s.name, err)
		}
		logf("== %s done in %v", s.name, time.Since(t).Round(time.Second))
	}
	b.res.Env.LoadAvgAfter = loadavg()
	b.res.Env.TotalS = time.Since(start).Seconds()
	b.res.Generated = time.Now().UTC().Format(time.RFC3339)
	b.res.Rows = buildRows(b.res)
	if err := writeOutputs(b.out, b.res); err != nil {
		fatal(err)
	}
	logf("wrote %s (results.json, README.md, *.svg) in %v", b.out, time.Since(start).Round(time.Second))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", a...)
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		fatal(err)
	}
	return a
}

func (b *bench) driver(impl string) string { return filepath.Join(b.bin, impl+"-driver") }

// order alternates which implementation goes first, per repetition.
func (b *bench) order(rep int) []string {
	if rep%2 == 0 {
		return b.impls
	}
	return []string{b.impls[1], b.impls[0]}
}

func (b *bench) env() {
	e := &b.res.Env
	e.GoVersion = runtime.Version()
	e.NumCPU = runtime.NumCPU()
	e.Kernel = strings.TrimSpace(readFile("/proc/sys/kernel/osrelease"))
	for _, l := range strings.Split(readFile("/proc/cpuinfo"), "\n") {
		if strings.HasPrefix(l, "model name") {
			e.CPU = strings.TrimSpace(l[strings.IndexByte(l, ':')+1:])
			break
		}
	}
	_, err := exec.LookPath("taskset")
	e.Taskset = err == nil
	b.pin = e.Taskset && e.NumCPU >= 2
	b.netns = canNetns(b.self)
	e.Netns = b.netns
	e.LoadAvgBefore = loadavg()
	if !b.pin {
		b.res.Notes = append(b.res.Notes, "taskset (util-linux) missing or fewer than 2 CPUs: processes were not pinned; target and prober share the cores")
	}
	if !b.netns {
		b.res.Notes = append(b.res.Notes, "could not create network namespaces (not root?): network runs used the host's loopback, so other loopback traffic and earlier runs' TIME_WAIT sockets share the tables")
	}
	logf("env: %s, %d CPUs (%s), kernel %s, taskset %v, netns %v, load %s", e.GoVersion, e.NumCPU, e.CPU, e.Kernel, e.Taskset, e.Netns, e.LoadAvgBefore)
}

func (b *bench) cpus() (target, driver int) {
	if !b.pin {
		return -1, -1
	}
	return 0, 1
}

func readFile(p string) string {
	bs, _ := os.ReadFile(p)
	return string(bs)
}

func loadavg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// ---------------------------------------------------------------------------

func (b *bench) runSched() error {
	c := b.cfg
	_, cpu := b.cpus()
	for rep := 0; rep < c.Reps; rep++ {
		for _, n := range c.SchedWorkers {
			for _, impl := range b.order(rep) {
				cmd := pinned(cpu, b.driver(impl), "sched",
					"-workers", strconv.Itoa(n), "-period", c.SchedPeriod.String(),
					"-warmup", c.SchedWarmup.String(), "-window", c.SchedWindow.String())
				cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
				var r benchkit.SchedResult
				if err := runJSON(cmd, &r); err != nil {
					return err
				}
				b.res.Raw.Sched = append(b.res.Raw.Sched, SchedRun{Rep: rep, SchedResult: r})
				logf("sched rep %d %-7s %5d workers: lateness p50 %.3fms p99 %.3fms max %.3fms, %d/%d ticks, cpu %.1fms/s, mem %.0fB/worker (rss %.0fB), runq wait %.0fms/s",
					rep, impl, n, r.Lateness.P50US/1e3, r.Lateness.P99US/1e3, r.Lateness.MaxUS/1e3, r.Ticks, r.Expected,
					r.CPUmsPerSec, r.MemPerWorkerB, r.RSSPerWorkerB, r.RunqWaitMsPerS)
			}
		}
	}
	return nil
}

// subSecondWorkers and subSecondPeriod are the sub-second case: 1,000
// workers at probed.io/periodMilliseconds 100, against 1,000 at 1 s in the
// same run (probed only: the kubelet has no sub-second period).
const (
	subSecondWorkers = 1000
	subSecondPeriod  = 100 * time.Millisecond
)

func (b *bench) runSubSecond() error {
	c := b.cfg
	_, cpu := b.cpus()
	for rep := 0; rep < c.Reps; rep++ {
		var base, fast benchkit.SchedResult
		for _, run := range []struct {
			period time.Duration
			into   *benchkit.SchedResult
		}{{time.Second, &base}, {subSecondPeriod, &fast}} {
			cmd := pinned(cpu, b.driver("probed"), "sched",
				"-workers", strconv.Itoa(subSecondWorkers), "-period", run.period.String(),
				"-warmup", c.SchedWarmup.String(), "-window", c.SchedWindow.String())
			cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
			if err := runJSON(cmd, run.into); err != nil {
				return err
			}
			b.res.Raw.SubSecond = append(b.res.Raw.SubSecond, SchedRun{Rep: rep, SchedResult: *run.into})
		}
		ratio := func(a, b float64) float64 {
			if b == 0 {
				return 0
			}
			return a / b
		}
		logf("subsec rep %d probed %d workers at %v: lateness p50 %.3fms p99 %.3fms max %.3fms, %d/%d ticks, cpu %.1fms/s; "+
			"against 1s: lateness p50 %.2fx p99 %.2fx max %.2fx, cpu %.2fx (1s: p50 %.3fms p99 %.3fms max %.3fms, cpu %.1fms/s)",
			rep, subSecondWorkers, subSecondPeriod, fast.Lateness.P50US/1e3, fast.Lateness.P99US/1e3, fast.Lateness.MaxUS/1e3, fast.Ticks, fast.Expected, fast.CPUmsPerSec,
			ratio(fast.Lateness.P50US, base.Lateness.P50US), ratio(fast.Lateness.P99US, base.Lateness.P99US), ratio(fast.Lateness.MaxUS, base.Lateness.MaxUS),
			ratio(fast.CPUmsPerSec, base.CPUmsPerSec),
			base.Lateness.P50US/1e3, base.Lateness.P99US/1e3, base.Lateness.MaxUS/1e3, base.CPUmsPerSec)
	}
	return nil
}

// netPortRange is the ephemeral port range of every network namespace. All
// probes of a run go to one address and port, where a node's spread over
// many pod IPs: at saturation, 30,000–45,000 connections in a few seconds,
// each leaving a TIME-WAIT socket on one side, would otherwise exhaust the
// default 28,232 ports and make connect(2)'s port search, not the prober,
// the cost being measured.
const netPortRange = "1024 65535"

func (b *bench) runNet() error {
	for rep := 0; rep < b.cfg.Reps; rep++ {
		for _, proto := range b.protos {
			for _, impl := range b.order(rep) {
				r, err := b.netRun(impl, proto, nil)
				if err != nil {
					return err
				}
				b.res.Raw.Net = append(b.res.Raw.Net, NetRun{Rep: rep, NetResult: *r})
				logf("net rep %d %-7s %-4s: %.1fus cpu/probe, %.0f probes/s (util %.2f, %d errors, runq wait %.0fms/s), %.1f allocs %.0fB/probe, p50 %.0fus p99 %.0fus at %g/s (runq wait %.0fms/s)",
					rep, impl, proto, r.Sat.CPUPerProbeUS, r.Sat.ProbesPerSec, r.Sat.Util, r.Sat.Errors, r.Sat.RunqWaitMsPerS,
					r.Allocs.AllocsPerProbe, r.Allocs.BytesPerProbe, r.Lat.Stats.P50US, r.Lat.Stats.P99US, r.Lat.Rate, r.Lat.RunqWaitMsPerS)
			}
		}
	}
	return nil
}

// netRun runs figures 1–3's driver for one implementation and protocol in a
// fresh namespace; env adds to the driver's environment (the opt-in modes).
func (b *bench) netRun(impl, proto string, env []string) (*benchkit.NetResult, error) {
	c := b.cfg
	tcpu, dcpu := b.cpus()
	spec := netnsSpec{Target: filepath.Join(b.bin, "target"), TargetCPU: tcpu, DriverCPU: dcpu,
		Lanes: []lane{{Driver: b.driver(impl), Env: env, Args: []string{"net", "-proto", proto, "-port", "{" + proto + "}",
			"-alloc-n", strconv.Itoa(c.NetAllocN), "-sat-dur", c.NetSatDur.String(), "-sat-conc", strconv.Itoa(c.NetSatConc),
			"-lat-rate", fmt.Sprint(c.NetLatRate), "-lat-dur", c.NetLatDur.String()}}}}
	if b.netns {
		spec.PortRange = netPortRange
	}
	lr, err := b.runNetns(spec)
	if err != nil {
		return nil, err
	}
	var r benchkit.NetResult
	if err := json.Unmarshal(lr[0].Out, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// twSpec is figure 5's fixed-rate run for one implementation and protocol,
// counting the TIME_WAIT sockets on the target's port afterwards.
func (b *bench) twSpec(impl, proto string, env []string) netnsSpec {
	c := b.cfg
	tcpu, dcpu := b.cpus()
	rate := c.TWRate
	if proto == "grpc" {
		rate = c.TWRateGRPC
	}
	spec := netnsSpec{Target: filepath.Join(b.bin, "target"), TargetCPU: tcpu, DriverCPU: dcpu,
		Lanes: []lane{{Driver: b.driver(impl), Env: env, CountTW: proto,
			Args: []string{"rate", "-proto", proto, "-port", "{" + proto + "}", "-rate", fmt.Sprint(rate), "-dur", c.TWDur.String()}}}}
	if b.netns {
		// As for probes of pod IPs on a real node: the default
		// tcp_tw_reuse=2 lets connect() recycle TIME_WAIT ports on
		// loopback only.
		zero := 0
		spec.TWReuse = &zero
		spec.PortRange = netPortRange
	}
	return spec
}

// runTW counts TIME_WAIT sockets per target port after a fixed-rate run.
// Both implementations run at once, each in its own fresh namespace (its
// own port space and TIME_WAIT table) against its own target. gRPC probes
// cost ~5x the CPU of HTTP ones: at 1,000/s two of them do not fit on one
// shared core, so gRPC runs at TWRateGRPC.
func (b *bench) runTW() error {
	for rep := 0; rep < b.cfg.Reps; rep++ {
		for _, proto := range b.protos {
			impls := b.order(rep)
			results := make([][]laneResult, len(impls))
			errs := make([]error, len(impls))
			var wg sync.WaitGroup
			for i, impl := range impls {
				spec := b.twSpec(impl, proto, nil)
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = b.runNetns(spec)
				}()
			}
			wg.Wait()
			for i := range impls {
				if errs[i] != nil {
					return errs[i]
				}
				l := results[i][0]
				var r benchkit.RateResult
				if err := json.Unmarshal(l.Out, &r); err != nil {
					return err
				}
				run := TWRun{Rep: rep, RateResult: r, TW: *l.TW}
				b.res.Raw.TW = append(b.res.Raw.TW, run)
				logf("tw rep %d %-7s %-4s: %d probes at %g/s (%d errors, dispatcher behind by up to %.1fms): TIME_WAIT prober side %d, server side %d",
					rep, r.Impl, proto, r.Sent, r.Rate, r.Errors, r.MaxBehindUS/1e3, run.TW.ProberSide, run.TW.ServerSide)
			}
		}
	}
	return nil
}

func (b *bench) runExec() error {
	c := b.cfg
	_, cpu := b.cpus()
	cmd := exec.Command(filepath.Join(b.bin, "probed-exec-driver"), "exec", "-repo", b.repo, "-rates", c.ExecRates, "-durs", c.ExecDurs,
		"-reps", strconv.Itoa(c.Reps), "-pin-cpu", strconv.Itoa(cpu))
	var r benchkit.ExecResult
	if err := runJSON(cmd, &r); err != nil {
		return err
	}
	b.res.Raw.Exec = &r
	if !r.Available {
		b.res.Notes = append(b.res.Notes, "exec figure "+r.Note)
		logf("exec: %s", r.Note)
	}
	return nil
}

// runProfiles profiles each prober at saturation (CPU) and over the
// allocation run (every allocation), outside the measured repetitions, and
// keeps `go tool pprof -top` summaries.
func (b *bench) runProfiles() error {
	tcpu, dcpu := b.cpus()
	raw := filepath.Join(b.bin, "..", "profiles")
	if err := os.MkdirAll(raw, 0o755); err != nil {
		return err
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		b.res.Notes = append(b.res.Notes, "no go tool: profiles were not summarised")
	}
	satDur, profAllocN := 3*time.Second, 1000
	if b.cfg.Quick {
		satDur, profAllocN = time.Second, 200
	}
	for _, proto := range b.protos {
		for _, impl := range b.impls {
			base := filepath.Join(raw, impl+"-"+proto)
			spec := netnsSpec{Target: filepath.Join(b.bin, "target"), TargetCPU: tcpu, DriverCPU: dcpu,
				Lanes: []lane{{Driver: b.driver(impl), Args: []string{"net", "-proto", proto, "-port", "{" + proto + "}",
					"-alloc-n", strconv.Itoa(profAllocN), "-sat-dur", satDur.String(), "-sat-conc", strconv.Itoa(b.cfg.NetSatConc), "-lat-dur", "0",
					"-cpuprofile", base + ".cpu.pprof", "-memprofile", base + ".allocs.pprof"}}}}
			if _, err := b.runNetns(spec); err != nil {
				return err
			}
			if gobin == "" {
				continue
			}
			outs := []struct {
				name string
				args []string
			}{
				{"cpu", []string{"-top", "-nodecount=30", base + ".cpu.pprof"}},
				{"cpu-cum", []string{"-top", "-cum", "-nodecount=40", base + ".cpu.pprof"}},
				{"alloc-objects", []string{"-top", "-sample_index=alloc_objects", "-nodecount=30", "-base", base + ".allocs.pprof.base", base + ".allocs.pprof"}},
				{"alloc-space", []string{"-top", "-sample_index=alloc_space", "-nodecount=30", "-base", base + ".allocs.pprof.base", base + ".allocs.pprof"}},
			}
			for _, o := range outs {
				cmd := exec.Command(gobin, append([]string{"tool", "pprof"}, o.args...)...)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					return fmt.Errorf("pprof %s: %v: %s", o.name, err, stderr.String())
				}
				dst := filepath.Join(b.out, "profiles", fmt.Sprintf("%s-%s-%s.txt", impl, proto, o.name))
				text := stdout.Bytes()
				if strings.HasPrefix(o.name, "alloc") {
					text = append([]byte(fmt.Sprintf("# %d sequential probes after a 50-probe warm-up (subtracted): divide by %d for per-probe figures\n", profAllocN, profAllocN)), text...)
				}
				if err := os.WriteFile(dst, text, 0o644); err != nil {
					return err
				}
			}
			logf("profile %s %s: done", impl, proto)
		}
	}
	// The worker loop: CPU of 10,000 idle workers for a few seconds.
	for _, impl := range b.impls {
		prof := filepath.Join(raw, impl+"-sched10k.cpu.pprof")
		cmd := pinned(dcpu, b.driver(impl), "sched", "-workers", "10000", "-period", b.cfg.SchedPeriod.String(),
			"-warmup", "2s", "-window", (2 * satDur).String(), "-cpuprofile", prof)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		var r benchkit.SchedResult
		if err := runJSON(cmd, &r); err != nil {
			return err
		}
		if gobin == "" {
			continue
		}
		for name, args := range map[string][]string{
			"cpu":     {"-top", "-nodecount=30", prof},
			"cpu-cum": {"-top", "-cum", "-nodecount=40", prof},
		} {
			cmd := exec.Command(gobin, append([]string{"tool", "pprof"}, args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("pprof %s: %v: %s", name, err, stderr.String())
			}
			if err := os.WriteFile(filepath.Join(b.out, "profiles", fmt.Sprintf("%s-sched10k-%s.txt", impl, name)), stdout.Bytes(), 0o644); err != nil {
				return err
			}
		}
		logf("profile %s sched 10k: done", impl)
	}
	b.res.Profiles = true
	return nil
}

// runJSON runs cmd and decodes its last stdout line; stderr is passed on.
func runJSON(cmd *exec.Cmd, v any) error {
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	return json.Unmarshal(lines[len(lines)-1], v)
}

// resetRaw drops a phase's earlier results before it runs again (-merge).
func resetRaw(r *Raw, phase string) {
	switch phase {
	case "sched":
		r.Sched = nil
	case "net":
		r.Net = nil
	case "tw":
		r.TW = nil
	case "exec":
		r.Exec = nil
	case "optin":
		r.OptIn, r.OptInTW = nil, nil
	case "api":
		r.API = nil
	case "subsec":
		r.SubSecond = nil
	}
}
