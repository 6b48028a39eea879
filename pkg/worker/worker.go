package worker

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// defaultPeriod stands in for a zero period, which validation should have
// prevented; a zero period would spin.
const defaultPeriod = 10 * time.Second

// Config is everything one worker needs. Container, Spec, Prober, Pods and
// Results are required; the rest have defaults.
type Config struct {
	PodUID types.UID
	// PodNamespace and PodName label metrics and logs; they never change for
	// a UID.
	PodNamespace string
	PodName      string
	// StaticPodUID is a mirror pod's static pod UID (see StaticPodUID),
	// which the runtime's containers carry; "" for other pods.
	StaticPodUID string
	// Container is the target container's spec; the worker keeps the
	// pointer (no copy per worker) and never mutates it. Required.
	Container *v1.Container
	ProbeType probespec.ProbeType
	// Spec is the probe, already defaulted and validated.
	Spec *v1.Probe

	Prober Prober
	Pods   PodSource
	// Results is this probe type's results cache.
	Results results.Manager
	// Recorder receives the prober's events (Unhealthy, ProbeWarning); nil
	// emits none.
	Recorder Recorder
	// Killer stops the container at the liveness or startup failure
	// threshold; nil takes no action.
	Killer Killer

	// Started reports whether the current container instance counts as
	// started, in probed's own sense (contract §2), not the kubelet's
	// containerStatuses[].started. Nil falls back to cs.Started.
	Started func(pod *v1.Pod, cs *v1.ContainerStatus) bool
	// InitialResult optionally seeds the result of the first container
	// instance this worker sees, instead of the kubelet's initial value, so a
	// restart of probed does not flip a condition. Later instances always
	// start from the initial value.
	InitialResult func(containerID string) (results.Result, bool)

	// Clock defaults to the real clock.
	Clock clock.Clock
	// Scheduler wakes the worker every period: share one among all workers
	// (NewScheduler on Clock), so that they cost one timer. Nil gives the
	// worker one of its own on Clock.
	Scheduler Scheduler
	// Watches stops the worker when Run's context ends: share one among all
	// workers. Nil gives the worker one of its own.
	Watches *Watches
	// DaemonStart is when probed started; workers created within one period
	// of it wait a random part of the period first, to spread the probes.
	DaemonStart time.Time
	// Rand returns a number in [0, 1); defaults to math/rand/v2.Float64.
	Rand func() float64
	// Metrics may be nil.
	Metrics *Metrics
	// OnExit is called once, when Run returns, after the worker's results
	// and metric series are removed.
	OnExit func()

	// KeepAlive is the probe's "probed.io/keepAlive" (httpGet and grpc):
	// the worker's Session keeps its connection between runs.
	KeepAlive bool
	// HTTPCheck is the probe's response checks (httpGet); nil: the kubelet's rule.
	HTTPCheck *probespec.HTTPCheck
	// Period and Timeout replace the spec's periodSeconds and
	// timeoutSeconds when positive ("probed.io/periodMilliseconds" and
	// "probed.io/timeoutMilliseconds").
	Period, Timeout time.Duration

	// ResultChangeEvents emits a Normal ProbeResultChanged event through
	// Recorder each time the decided result of a container instance flips
	// (--probe-result-change-events).
	ResultChangeEvents bool
}

// Worker probes one container periodically. Create it with New, start it
// with Run in its own goroutine, end it with Stop.
type Worker struct {
	cfg     Config
	initial results.Result
	series  series
	// events is handed to the prober by pointer, so that no sink is boxed
	// per probe; pod is set before each probe.
	events containerEvents

	// The run loop parks on wake alone; Stop, Trigger and the scheduler set
	// a request and send a coalescing token.
	sched   Scheduler
	wake    chan struct{}
	stopReq atomic.Bool
	trigReq atomic.Bool
	pending atomic.Int64 // due+1 of a delivered tick not yet taken, 0 if none
	watch   *ctxWatch    // stops the worker when Run's ctx ends
	// period is set by sched.add; gen, added and gone are sched's, under
	// its lock.
	period int64
	gen    uint32
	ran    atomic.Bool // Run was called
	added  bool
	gone   bool

	// Loop state, owned by the goroutine running doProbe.
	containerID string
	decided     results.Result // the instance's published result, for ProbeResultChanged
	lastResult  results.Result
	resultRun   int
	onHold      bool
	killPending bool // the last kill failed; retry while the instance runs
	counted     bool // a result has been counted since the worker began
	inJitter    bool // the first tick ends the start-up jitter
	anchor      bool // the tick grid starts at the next probe
	registered  bool // with the scheduler and the context watch
	state       State

	// mu guards what Snapshot reads: a published copy of the loop state and
	// the history.
	mu     sync.Mutex
	snap   published
	hist   history
	done   chan struct{} // nil until Done is called
	exited bool

	// session is the prober's per-worker state (request templates, kept
	// connections) for network probes; nil otherwise. Closed in exit.
	session *prober.Session
}

// New returns a worker that has not started. It panics if a required field
// of cfg is missing: that is a programming error.
func New(cfg Config) *Worker {
	if cfg.Container == nil || cfg.Spec == nil || cfg.Prober == nil || cfg.Pods == nil || cfg.Results == nil {
		panic("worker.New: Container, Spec, Prober, Pods and Results are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Scheduler == nil {
		cfg.Scheduler = NewScheduler(cfg.Clock)
	}
	if cfg.Watches == nil {
		cfg.Watches = NewWatches()
	}
	w := &Worker{
		session: newSession(cfg.Spec),
		cfg:     cfg,
		initial: initialValue(cfg.ProbeType),
		series:  newSeries(cfg.ProbeType, cfg.Container.Name, cfg.PodName, cfg.PodNamespace, string(cfg.PodUID)),
		sched:   cfg.Scheduler,
		wake:    make(chan struct{}, 1),
		state:   StatePending,
	}
	w.events.w = w
	w.publish()
	return w
}

// initialValue is the kubelet's result for a new container instance:
// readiness fails until proven, liveness passes until disproven, startup is
// unknown.
func initialValue(t probespec.ProbeType) results.Result {
	switch t {
	case probespec.Readiness:
		return results.Failure
	case probespec.Liveness:
		return results.Success
	}
	return results.Unknown
}

// Run probes until Stop, ctx's end, or a container that will not run again.
// On return it removes the worker's result and metric series and calls
// OnExit. A second call returns at once.
//
// Between probes the goroutine parks on wake right here. The work is split
// into small non-inlined frames (start, step, doProbe's parts) so that an
// idle tick with a quick probe stays within the goroutine's initial 2 KiB
// stack: a grown stack is never shrunk back below 4 KiB while it parks.
func (w *Worker) Run(ctx context.Context) {
	if !w.ran.CompareAndSwap(false, true) {
		w.errorLog(nil, "Probe worker already ran")
		return
	}
	ctx = w.withOwner(ctx)
	for ok := w.start(ctx); ok; ok = w.step(ctx) {
		<-w.wake
	}
	w.finish()
}

// start registers the worker with the scheduler and runs the first probe,
// unless a start-up jitter puts it off; false if the worker is done.
//
//go:noinline
func (w *Worker) start(ctx context.Context) bool {
	w.cfg.Metrics.workerDelta(&w.series, 1)
	if w.stopReq.Load() || ctx.Err() != nil {
		return false
	}
	// ctx's end is one more stop request: no goroutine watches it.
	w.watch = w.cfg.Watches.watch(ctx, w)
	w.registered = true

	period := time.Duration(w.cfg.Spec.PeriodSeconds) * time.Second
	if w.cfg.Period > 0 {
		period = w.cfg.Period
	}
	if period <= 0 {
		period = defaultPeriod
	}
	// After a restart of probed every worker starts at once; spread them over
	// a period, as the kubelet does after its own restart. A trigger that
	// came before the start asks for the probe this start runs anyway.
	triggered := w.trigReq.Swap(false)
	var jitter time.Duration
	if !triggered && period > w.cfg.Clock.Since(w.cfg.DaemonStart) {
		jitter = time.Duration(w.cfg.Rand() * float64(period))
	}
	w.sched.add(w, jitter, period)
	w.inJitter = jitter > 0
	w.anchor = true
	return w.inJitter || w.doProbe(ctx)
}

// step handles one wake-up: a stop, a tick or a trigger (which probe), or
// nothing (a stale token). False when the worker is done.
//
//go:noinline
func (w *Worker) step(ctx context.Context) bool {
	if w.stopReq.Load() {
		return false
	}
	if w.trigReq.Swap(false) {
		// Probe now and again one whole period later, as the kubelet's
		// probeTicker.Reset does.
		w.sched.reset(w)
		w.inJitter = false
		w.vlog(4, "Manual probe run")
		return w.doProbe(ctx)
	}
	due := w.pending.Swap(0)
	if due == 0 {
		return true
	}
	if w.inJitter {
		w.inJitter = false
		return w.doProbe(ctx)
	}
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.observeLateness(&w.series, time.Duration(w.sched.now()-(due-1)).Seconds())
	}
	w.vlog(5, "Periodic probe")
	return w.doProbe(ctx)
}

// finish leaves the scheduler and cleans up.
//
//go:noinline
func (w *Worker) finish() {
	if w.registered {
		w.watch.leave(w)
		w.sched.remove(w)
	}
	w.exit()
}

// signal wakes the run loop; tokens coalesce.
func (w *Worker) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Stop asks the worker to end. It never blocks, may be called any number of
// times, before, during or after Run; a worker stopped before Run probes
// nothing.
func (w *Worker) Stop() {
	w.stopReq.Store(true)
	w.signal()
}

// Trigger asks for a probe now, and restarts the period from it. It never
// blocks; triggers coalesce.
func (w *Worker) Trigger() {
	w.trigReq.Store(true)
	w.signal()
}

// Done is closed when Run has cleaned up and OnExit has returned.
func (w *Worker) Done() <-chan struct{} {
	// Made on demand: most workers are never waited for.
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done == nil {
		w.done = make(chan struct{})
		if w.exited {
			close(w.done)
		}
	}
	return w.done
}

// exit forgets the worker's result and series, as the kubelet's run does on
// its way out, then tells the owner.
func (w *Worker) exit() {
	w.session.Close()
	if w.containerID != "" {
		w.cfg.Results.Remove(w.containerID)
	}
	w.cfg.Metrics.deleteSeries(&w.series)
	w.cfg.Metrics.workerDelta(&w.series, -1)
	w.state = StateStopped
	w.publish()
	w.vlog(3, "Probe worker ended")
	if w.cfg.OnExit != nil {
		w.cfg.OnExit()
	}
	w.mu.Lock()
	w.exited = true
	if w.done != nil {
		close(w.done)
	}
	w.mu.Unlock()
}

// published is the loop state as Snapshot last saw it.
type published struct {
	state       State
	containerID string
	resultRun   int
	lastResult  results.Result
	counted     bool
}

// publish copies the loop state for Snapshot.
func (w *Worker) publish() {
	p := published{w.state, w.containerID, w.resultRun, w.lastResult, w.counted}
	// Only this goroutine writes snap, so it may read it unlocked.
	if p == w.snap {
		return
	}
	w.mu.Lock()
	w.snap = p
	w.mu.Unlock()
}

func (w *Worker) record(at time.Time, r results.Result, took time.Duration, output string, failed bool, err string) {
	w.mu.Lock()
	w.hist.add(at, r, took, output, failed, err)
	w.mu.Unlock()
}

// logKV is never inlined: its arguments would otherwise take room in the
// frames of the probe path, and grow every worker's stack.
//
//go:noinline
func (w *Worker) logKV(kv ...any) []any {
	return append([]any{
		"pod", klog.KRef(w.cfg.PodNamespace, w.cfg.PodName), "podUID", w.cfg.PodUID,
		"containerName", w.cfg.Container.Name, "probeType", w.cfg.ProbeType,
	}, kv...)
}

// vlog logs at level with the worker's key/values. Callers on the probe path
// test klog.V first when they pass values, so that nothing is boxed while
// the level is off. Never inlined, for the same reason as logKV.
//
//go:noinline
func (w *Worker) vlog(level klog.Level, msg string, kv ...any) {
	if v := klog.V(level); v.Enabled() {
		v.InfoS(msg, w.logKV(kv...)...)
	}
}

//go:noinline
func (w *Worker) errorLog(err error, msg string, kv ...any) {
	klog.ErrorS(err, msg, w.logKV(kv...)...)
}

// newSession gives HTTP and gRPC probes a prober.Session; the others keep
// nothing between runs.
func newSession(spec *v1.Probe) *prober.Session {
	if spec.HTTPGet != nil || spec.GRPC != nil {
		return prober.NewSession()
	}
	return nil
}
