// Package benchkit measures one prober implementation inside its own process.
//
// A driver binary (one for probed, one for the kubelet) supplies a Maker that
// turns a protocol and a loopback target into a Probe, and a Scheduler that
// starts N periodic workers; benchkit does the rest the same way for both:
// load shapes, timing, CPU from getrusage, allocations from runtime.MemStats,
// profiles, and one JSON result on stdout. The orchestrator (test/bench/cmd/bench)
// pins each driver to one core with GOMAXPROCS=1 and compares the results.
package benchkit

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Probe runs one probe and returns nil when it succeeded.
type Probe func(ctx context.Context) error

// Maker builds the Probe for proto ("http", "tcp" or "grpc") against host:port.
type Maker func(proto, host string, port int) (Probe, error)

// Driver is what a driver binary implements.
type Driver struct {
	// Impl names the implementation: "probed" or "kubelet".
	Impl  string
	Maker Maker
	Sched Scheduler
	// Extra subcommands, such as probed's "exec".
	Extra map[string]func(args []string) (any, error)
}

// Main dispatches os.Args[1] (net, rate, sched or an Extra) and prints the
// result as one line of JSON on stdout. It exits non-zero on error.
func Main(d Driver) {
	if len(os.Args) < 2 {
		fatalf("usage: %s net|rate|sched ... (flags per subcommand; -h for help)", os.Args[0])
	}
	sub, args := os.Args[1], os.Args[2:]
	var (
		res any
		err error
	)
	switch sub {
	case "net":
		res, err = runNet(d, args)
	case "rate":
		res, err = runRate(d, args)
	case "sched":
		res, err = runSched(d, args)
	default:
		f, ok := d.Extra[sub]
		if !ok {
			fatalf("unknown subcommand %q", sub)
		}
		res, err = f(args)
	}
	if err != nil {
		fatalf("%s %s: %v", d.Impl, sub, err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fatalf("encode: %v", err)
	}
}

// logf writes progress to stderr when BENCHKIT_VERBOSE is set.
func logf(format string, a ...any) {
	if os.Getenv("BENCHKIT_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", a...)
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

// CPU is the process's user and system time so far (all threads, GC included).
func CPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// RunqWait is how long this process's live threads have waited on a CPU run
// queue while runnable (/proc/self/task/*/schedstat, second field): time
// other processes on the same core took from us. It is the noise gauge.
func RunqWait() time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		var run, wait int64
		if _, err := fmt.Sscan(string(b), &run, &wait); err == nil {
			sum += wait
		}
	}
	return time.Duration(sum)
}

// Stats summarises durations.
type Stats struct {
	N     int     `json:"n"`
	P50US float64 `json:"p50_us"`
	P90US float64 `json:"p90_us"`
	P99US float64 `json:"p99_us"`
	MaxUS float64 `json:"max_us"`
}

// Summarize sorts d in place and returns its percentiles (nearest rank).
func Summarize(d []time.Duration) Stats {
	if len(d) == 0 {
		return Stats{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	q := func(p float64) float64 {
		i := int(p*float64(len(d))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(d) {
			i = len(d) - 1
		}
		return us(d[i])
	}
	return Stats{N: len(d), P50US: q(0.50), P90US: q(0.90), P99US: q(0.99), MaxUS: us(d[len(d)-1])}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// ---------------------------------------------------------------------------
// net: allocations, saturation and latency at a fixed rate, in one process.

// NetResult is the outcome of "net".
type NetResult struct {
	Impl  string `json:"impl"`
	Proto string `json:"proto"`
	// Allocs: N sequential probes after a warm-up, runtime.MemStats deltas.
	Allocs struct {
		N              int     `json:"n"`
		AllocsPerProbe float64 `json:"allocs_per_probe"`
		BytesPerProbe  float64 `json:"bytes_per_probe"`
	} `json:"allocs"`
	// Sat: Conc closed loops for a fixed time on one core (GOMAXPROCS=1).
	Sat struct {
		Conc          int     `json:"conc"`
		Probes        int64   `json:"probes"`
		Errors        int64   `json:"errors"`
		WallS         float64 `json:"wall_s"`
		UserS         float64 `json:"user_s"`
		SysS          float64 `json:"sys_s"`
		CPUPerProbeUS float64 `json:"cpu_per_probe_us"`
		ProbesPerSec  float64 `json:"probes_per_sec"`
		// Util is CPU/wall: near 1 means the prober's core was the limit.
		Util float64 `json:"util"`
		// RunqWaitMsPerS: ms per wall second our threads sat runnable
		// behind other processes (noise).
		RunqWaitMsPerS float64 `json:"runq_wait_ms_per_s"`
		FirstErr       string  `json:"first_err,omitempty"`
		GCs            uint32  `json:"gcs"`
		Goroutine      int     `json:"goroutines_after"`
	} `json:"sat"`
	// Lat: an open-loop schedule at Rate probes/s, one goroutine per probe.
	Lat struct {
		Rate          float64 `json:"rate"`
		Errors        int64   `json:"errors"`
		Stats         Stats   `json:"stats"`
		CPUPerProbeUS float64 `json:"cpu_per_probe_us"`
		MaxBehindUS   float64 `json:"max_behind_us"`
		// RunqWaitMsPerS: as in Sat.
		RunqWaitMsPerS float64 `json:"runq_wait_ms_per_s"`
	} `json:"lat"`
}

func runNet(d Driver, args []string) (*NetResult, error) {
	fs := flag.NewFlagSet("net", flag.ContinueOnError)
	proto := fs.String("proto", "http", "http, tcp or grpc")
	host := fs.String("host", "127.0.0.1", "target host")
	port := fs.Int("port", 0, "target port")
	allocN := fs.Int("alloc-n", 1000, "sequential probes for the allocation count")
	satDur := fs.Duration("sat-dur", 4*time.Second, "saturation run length")
	satConc := fs.Int("sat-conc", 8, "concurrent probe loops at saturation")
	latRate := fs.Float64("lat-rate", 200, "probes per second for the latency run")
	latDur := fs.Duration("lat-dur", 8*time.Second, "latency run length")
	cpuProf := fs.String("cpuprofile", "", "write a CPU profile of the saturation run")
	memProf := fs.String("memprofile", "", "write an allocation profile (MemProfileRate=1) of the allocation run")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *memProf != "" {
		runtime.MemProfileRate = 1
	}
	probe, err := d.Maker(*proto, *host, *port)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	res := &NetResult{Impl: d.Impl, Proto: *proto}

	// Warm up: first connections, lazily built clients, code paths.
	for i := 0; i < 50; i++ {
		if err := probe(ctx); err != nil {
			return nil, fmt.Errorf("warm-up probe: %w", err)
		}
	}
	time.Sleep(100 * time.Millisecond) // let asynchronous closes finish

	// Allocations per probe.
	if *allocN > 0 {
		var m0, m1 runtime.MemStats
		runtime.GC()
		if *memProf != "" {
			// The baseline for pprof -diff_base: what the warm-up allocated.
			if err := writeHeapProfile(*memProf + ".base"); err != nil {
				return nil, err
			}
		}
		runtime.ReadMemStats(&m0)
		for i := 0; i < *allocN; i++ {
			if err := probe(ctx); err != nil {
				return nil, fmt.Errorf("alloc probe: %w", err)
			}
		}
		time.Sleep(50 * time.Millisecond)
		runtime.ReadMemStats(&m1)
		res.Allocs.N = *allocN
		res.Allocs.AllocsPerProbe = float64(m1.Mallocs-m0.Mallocs) / float64(*allocN)
		res.Allocs.BytesPerProbe = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(*allocN)
		if *memProf != "" {
			if err := writeHeapProfile(*memProf); err != nil {
				return nil, err
			}
			runtime.MemProfileRate = 0 // do not slow down what follows
		}
	}

	// Saturation.
	if *satDur > 0 {
		s := &res.Sat
		s.Conc = *satConc
		// Short warm-up at full load, then the measured run.
		saturate(ctx, probe, *satConc, *satDur/8)
		time.Sleep(100 * time.Millisecond)
		if *cpuProf != "" {
			f, err := os.Create(*cpuProf)
			if err != nil {
				return nil, err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				return nil, err
			}
			defer f.Close()
		}
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		u0, s0 := CPU()
		q0 := RunqWait()
		start := time.Now()
		n, nerr, firstErr := saturate(ctx, probe, *satConc, *satDur)
		wall := time.Since(start)
		u1, s1 := CPU()
		s.RunqWaitMsPerS = (RunqWait() - q0).Seconds() * 1e3 / wall.Seconds()
		runtime.ReadMemStats(&ms1)
		if *cpuProf != "" {
			pprof.StopCPUProfile()
		}
		s.Probes, s.Errors, s.WallS = n, nerr, wall.Seconds()
		s.UserS, s.SysS = (u1 - u0).Seconds(), (s1 - s0).Seconds()
		if n > 0 {
			s.CPUPerProbeUS = (s.UserS + s.SysS) * 1e6 / float64(n)
		}
		s.ProbesPerSec = float64(n) / wall.Seconds()
		s.Util = (s.UserS + s.SysS) / wall.Seconds()
		s.GCs = ms1.NumGC - ms0.NumGC
		if firstErr != nil {
			s.FirstErr = firstErr.Error()
		}
		s.Goroutine = runtime.NumGoroutine()
		time.Sleep(200 * time.Millisecond)
	}

	// Latency at a moderate fixed rate.
	if *latDur > 0 && *latRate > 0 {
		l := &res.Lat
		l.Rate = *latRate
		u0, s0 := CPU()
		q0, t0 := RunqWait(), time.Now()
		lat, nerr, behind := OpenLoop(ctx, probe, *latRate, *latDur, true)
		u1, s1 := CPU()
		l.RunqWaitMsPerS = (RunqWait() - q0).Seconds() * 1e3 / time.Since(t0).Seconds()
		l.Errors = nerr
		l.Stats = Summarize(lat)
		l.MaxBehindUS = us(behind)
		if len(lat) > 0 {
			l.CPUPerProbeUS = (u1 - u0 + s1 - s0).Seconds() * 1e6 / float64(len(lat))
		}
	}
	return res, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// "allocs" holds every allocation since start, as of the last completed
	// GC: run one so that it is up to date. pprof's alloc_space and
	// alloc_objects sample indexes read it.
	runtime.GC()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// saturate runs conc loops of probe until d has passed.
func saturate(ctx context.Context, probe Probe, conc int, d time.Duration) (n, nerr int64, firstErr error) {
	var (
		wg      sync.WaitGroup
		count   atomic.Int64
		errs    atomic.Int64
		errOnce sync.Once
		stop    atomic.Bool
	)
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := probe(ctx); err != nil {
					errs.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	return count.Load(), errs.Load(), firstErr
}

// OpenLoop starts one probe every 1/rate seconds, each on its own goroutine
// (as independent workers would), for d. With measure it returns each
// probe's duration, from its actual start. behind is how late the
// dispatcher itself ran at worst.
func OpenLoop(ctx context.Context, probe Probe, rate float64, d time.Duration, measure bool) (lat []time.Duration, nerr int64, behind time.Duration) {
	total := int(rate * d.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	if measure {
		lat = make([]time.Duration, total)
	}
	ok := make([]bool, total)
	var (
		wg   sync.WaitGroup
		errs atomic.Int64
	)
	start := time.Now()
	for i := 0; i < total; i++ {
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		} else if -w > behind {
			behind = -w
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			t := time.Now()
			err := probe(ctx)
			if err != nil {
				errs.Add(1)
				return
			}
			ok[i] = true
			if measure {
				lat[i] = time.Since(t)
			}
		}(i)
	}
	wg.Wait()
	if measure {
		out := lat[:0]
		for i, good := range ok {
			if good {
				out = append(out, lat[i])
			}
		}
		lat = out
	}
	return lat, errs.Load(), behind
}

// ---------------------------------------------------------------------------
// rate: a fixed rate for a fixed time (TIME_WAIT counts are taken outside).

// RateResult is the outcome of "rate".
type RateResult struct {
	Impl        string  `json:"impl"`
	Proto       string  `json:"proto"`
	Rate        float64 `json:"rate"`
	DurS        float64 `json:"dur_s"`
	Sent        int     `json:"sent"`
	Errors      int64   `json:"errors"`
	WallS       float64 `json:"wall_s"`
	MaxBehindUS float64 `json:"max_behind_us"`
}

func runRate(d Driver, args []string) (*RateResult, error) {
	fs := flag.NewFlagSet("rate", flag.ContinueOnError)
	proto := fs.String("proto", "http", "http, tcp or grpc")
	host := fs.String("host", "127.0.0.1", "target host")
	port := fs.Int("port", 0, "target port")
	rate := fs.Float64("rate", 1000, "probes per second")
	dur := fs.Duration("dur", 20*time.Second, "run length")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	probe, err := d.Maker(*proto, *host, *port)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	_, nerr, behind := OpenLoop(context.Background(), probe, *rate, *dur, false)
	return &RateResult{
		Impl: d.Impl, Proto: *proto, Rate: *rate, DurS: dur.Seconds(),
		Sent: int(*rate * dur.Seconds()), Errors: nerr,
		WallS: time.Since(start).Seconds(), MaxBehindUS: us(behind),
	}, nil
}

// ---------------------------------------------------------------------------
// sched: N idle periodic workers, lateness, CPU and memory.

// Scheduler starts periodic workers whose probes are no-ops that call
// rec.Tick(i) for worker i.
type Scheduler interface {
	// Prepare builds what exists whatever the prober's design (the pods and
	// their containers) so that it is not counted as worker memory.
	Prepare(n int, period time.Duration, rec *Recorder) error
	// Start creates and starts the n workers.
	Start() error
	// Stop stops them all and waits until they have returned.
	Stop()
}

// Recorder keeps the time of every probe call of every worker.
type Recorder struct {
	base  time.Time
	max   int
	calls []int64 // worker i's calls at [i*max, i*max+count[i])
	count []int32
}

// NewRecorder has room for maxCalls calls per worker; later calls are dropped.
func NewRecorder(workers, maxCalls int) *Recorder {
	return &Recorder{base: time.Now(), max: maxCalls,
		calls: make([]int64, workers*maxCalls), count: make([]int32, workers)}
}

// Tick records a probe call of worker i. Calls of one worker must not overlap.
func (r *Recorder) Tick(i int) {
	k := int(atomic.LoadInt32(&r.count[i]))
	if k >= r.max {
		return
	}
	r.calls[i*r.max+k] = int64(time.Since(r.base))
	atomic.StoreInt32(&r.count[i], int32(k+1))
}

// SchedResult is the outcome of "sched".
type SchedResult struct {
	Impl    string  `json:"impl"`
	Workers int     `json:"workers"`
	PeriodS float64 `json:"period_s"`
	WindowS float64 `json:"window_s"`
	// Ticks observed in the window, and how many the period promised.
	Ticks    int   `json:"ticks"`
	Expected int   `json:"expected"`
	Lateness Stats `json:"lateness"`
	// CPU of the whole process per wall second in the window.
	CPUmsPerSec float64 `json:"cpu_ms_per_s"`
	// Memory per idle worker, after GC: live heap, goroutine stacks, both, RSS.
	HeapPerWorkerB  float64 `json:"heap_per_worker_b"`
	StackPerWorkerB float64 `json:"stack_per_worker_b"`
	MemPerWorkerB   float64 `json:"mem_per_worker_b"`
	RSSPerWorkerB   float64 `json:"rss_per_worker_b"`
	// RunqWaitMsPerS: ms per wall second our threads sat runnable behind
	// other processes in the window (noise).
	RunqWaitMsPerS float64 `json:"runq_wait_ms_per_s"`
	StartS         float64 `json:"start_s"`
	// GCs in the window, and heap allocations per tick (the whole process).
	GCs           uint32  `json:"gcs"`
	AllocsPerTick float64 `json:"allocs_per_tick"`
	BytesPerTick  float64 `json:"bytes_per_tick"`
}

func runSched(d Driver, args []string) (*SchedResult, error) {
	fs := flag.NewFlagSet("sched", flag.ContinueOnError)
	n := fs.Int("workers", 10000, "workers")
	period := fs.Duration("period", time.Second, "probe period")
	warmup := fs.Duration("warmup", 3*time.Second, "time after start before measuring")
	window := fs.Duration("window", 12*time.Second, "measured window")
	cpuProf := fs.String("cpuprofile", "", "write a CPU profile of the window")
	startProf := fs.String("startprofile", "", "write a CPU profile of the start and warm-up")
	memProf := fs.String("memprofile", "", "write allocation profiles (MemProfileRate=1) at the window's start (FILE.base) and end")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if d.Sched == nil {
		return nil, errors.New("no scheduler")
	}
	if *memProf != "" {
		runtime.MemProfileRate = 1
	}
	maxCalls := int((*warmup+*window)/(*period)) + 8
	rec := NewRecorder(*n, maxCalls)
	if err := d.Sched.Prepare(*n, *period, rec); err != nil {
		return nil, err
	}
	heap0, stack0, rss0 := memNow()
	if *startProf != "" {
		f, err := os.Create(*startProf)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	if err := d.Sched.Start(); err != nil {
		return nil, err
	}
	startS := time.Since(t0).Seconds()
	logf("sched %s: %d workers started in %.2fs", d.Impl, *n, startS)
	time.Sleep(*warmup)
	if *startProf != "" {
		pprof.StopCPUProfile()
	}

	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
	}
	if *memProf != "" {
		if err := writeHeapProfile(*memProf + ".base"); err != nil {
			return nil, err
		}
	}
	gc0 := gcCycles() // not ReadMemStats: its stop-the-world would land in the window
	ao0, ab0 := heapAllocs()
	u0, s0 := CPU()
	q0 := RunqWait()
	w0 := time.Since(rec.base)
	time.Sleep(*window)
	w1 := time.Since(rec.base)
	u1, s1 := CPU()
	q1 := RunqWait()
	if *cpuProf != "" {
		pprof.StopCPUProfile()
	}
	gc1 := gcCycles()
	ao1, ab1 := heapAllocs()
	if *memProf != "" {
		if err := writeHeapProfile(*memProf); err != nil {
			return nil, err
		}
	}
	logf("sched %s: window done %.2fs after start", d.Impl, time.Since(t0).Seconds())
	// Memory last: the forced collections would otherwise disturb the window.
	heap1, stack1, rss1 := memNow()
	logf("sched %s: memory measured %.2fs after start", d.Impl, time.Since(t0).Seconds())
	d.Sched.Stop()
	logf("sched %s: stopped %.2fs after start", d.Impl, time.Since(t0).Seconds())

	res := &SchedResult{
		Impl: d.Impl, Workers: *n, PeriodS: period.Seconds(), WindowS: (w1 - w0).Seconds(),
		CPUmsPerSec:     (u1 - u0 + s1 - s0).Seconds() * 1e3 / (w1 - w0).Seconds(),
		HeapPerWorkerB:  float64(heap1-heap0) / float64(*n),
		StackPerWorkerB: float64(stack1-stack0) / float64(*n),
		RSSPerWorkerB:   float64(rss1-rss0) / float64(*n),
		RunqWaitMsPerS:  (q1 - q0).Seconds() * 1e3 / (w1 - w0).Seconds(),
		StartS:          startS,
		GCs:             uint32(gc1 - gc0),
	}
	res.MemPerWorkerB = res.HeapPerWorkerB + res.StackPerWorkerB
	lat := rec.lateness(int64(*period), int64(w0), int64(w1))
	if p := os.Getenv("BENCHKIT_DUMP"); p != "" {
		rec.dump(p, int64(*period))
	}
	res.Ticks = len(lat)
	res.Expected = int(float64(*n) * (w1 - w0).Seconds() / period.Seconds())
	res.Lateness = Summarize(lat)
	if res.Ticks > 0 {
		res.AllocsPerTick = float64(ao1-ao0) / float64(res.Ticks)
		res.BytesPerTick = float64(ab1-ab0) / float64(res.Ticks)
	}
	return res, nil
}

// lateness returns, for the calls in [from, to), how late each came against
// its worker's tick grid. A worker's grid is fixed by its ticker: call k
// (k >= 1) is due at t0 + k*period, where t0 is when the ticker was made,
// just before call 0 (the immediate first probe). So each call's lateness is
// its offset from call 0 modulo the period. Call 0 may itself have come a
// little after t0 (by up to tolerance, period/20), which makes an on-time
// tick look slightly early: the worker's offsets are then shifted so that
// its earliest tick counts as on time. A tick later than period-tolerance
// would wrap around and look on time, but such a tick is past the point
// where the ticker starts dropping ticks, which the tick count shows.
func (r *Recorder) lateness(period, from, to int64) []time.Duration {
	var out []time.Duration
	r.eachWorker(period, func(_ int, calls, late []int64) {
		for j, c := range calls {
			if j > 0 && c >= from && c < to {
				out = append(out, time.Duration(late[j]))
			}
		}
	})
	return out
}

// eachWorker computes per-worker lateness (late[0] is unused).
func (r *Recorder) eachWorker(period int64, f func(i int, calls, late []int64)) {
	tol := period / 20
	late := make([]int64, r.max)
	for i := range r.count {
		n := int(r.count[i])
		if n < 2 {
			continue
		}
		calls := r.calls[i*r.max : i*r.max+n]
		c0 := calls[0]
		shift := int64(0)
		for j, c := range calls[1:] {
			l := (c-c0+tol)%period - tol
			late[j+1] = l
			if l < shift {
				shift = l
			}
		}
		for j := 1; j < n; j++ {
			late[j] -= shift
		}
		f(i, calls, late[:n])
	}
}

// memNow returns the live heap and stack bytes after a full GC, and the RSS.
// One collection: with tens of thousands of goroutines on one P a forced
// cycle can take seconds.
func memNow() (heap, stack, rss uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse, readRSS()
}

func gcCycles() uint64 { return readMetric("/gc/cycles/total:gc-cycles") }

// heapAllocs returns the objects and bytes allocated so far, without
// stopping the world.
func heapAllocs() (objects, bytes uint64) {
	return readMetric("/gc/heap/allocs:objects"), readMetric("/gc/heap/allocs:bytes")
}

func readMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func readRSS() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res uint64
	if _, err := fmt.Sscan(string(b), &size, &res); err != nil {
		return 0
	}
	return res * uint64(os.Getpagesize())
}

// ---------------------------------------------------------------------------
// exec: the result types of probed-driver's "exec" subcommand.

// ExecRun is one exec rate for one runtime implementation.
type ExecRun struct {
	Impl   string  `json:"impl"` // "containerd" (native) or "cri" (ExecSync)
	Rep    int     `json:"rep"`
	Rate   float64 `json:"rate"`
	DurS   float64 `json:"dur_s"`
	Errors int64   `json:"errors"`
	Lat    Stats   `json:"lat"`
	// Host CPU per exec: containerd, its shims and everything they reaped
	// (runc, runc init, the command), from /proc.
	HostCPUmsPerExec float64 `json:"host_cpu_ms_per_exec"`
	// The driver process's own CPU per exec (probed's side of the exec).
	SelfCPUmsPerExec float64 `json:"self_cpu_ms_per_exec"`
}

// ExecResult is the outcome of "exec".
type ExecResult struct {
	Available  bool      `json:"available"`
	Note       string    `json:"note,omitempty"`
	Containerd string    `json:"containerd,omitempty"`
	Runs       []ExecRun `json:"runs"`
}

// dump writes "worker call call_ns lateness_ns" lines, for debugging.
func (r *Recorder) dump(path string, period int64) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	r.eachWorker(period, func(i int, calls, late []int64) {
		for j, c := range calls {
			fmt.Fprintf(f, "%d %d %d %d\n", i, j, c, late[j])
		}
	})
}
