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
	"github.com/probed-dev/probed/pkg/results"
)

// defaultPeriod stands in for a zero period, which validation should have
// prevented; a zero ticker would spin.
const defaultPeriod = 10 * time.Second

// Config is everything one worker needs. Spec, Prober, Pods and Results are
// required; the rest have defaults.
type Config struct {
	PodUID types.UID
	// PodNamespace and PodName label metrics and logs; they never change for
	// a UID.
	PodNamespace string
	PodName      string
	Container    v1.Container
	ProbeType    prober.ProbeType
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
}

// Worker probes one container periodically. Create it with New, start it
// with Run in its own goroutine, end it with Stop.
type Worker struct {
	cfg         Config
	clock       clock.Clock
	initial     results.Result
	series      series
	specSummary string

	stopCh    chan struct{}
	stopOnce  sync.Once
	triggerCh chan struct{}
	ran       atomic.Bool
	done      chan struct{}

	// Loop state, owned by the goroutine running doProbe.
	containerID string
	lastResult  results.Result
	resultRun   int
	onHold      bool
	killPending bool // the last kill failed; retry while the instance runs
	counted     bool // a result has been counted since the worker began
	state       State

	// mu guards what Snapshot reads: a published copy of the loop state and
	// the history.
	mu   sync.Mutex
	snap Snapshot
	hist history
}

// New returns a worker that has not started. It panics if a required field
// of cfg is missing: that is a programming error.
func New(cfg Config) *Worker {
	if cfg.Spec == nil || cfg.Prober == nil || cfg.Pods == nil || cfg.Results == nil {
		panic("worker.New: Spec, Prober, Pods and Results are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	w := &Worker{
		cfg:         cfg,
		clock:       cfg.Clock,
		initial:     initialValue(cfg.ProbeType),
		series:      newSeries(cfg.ProbeType, cfg.Container.Name, cfg.PodName, cfg.PodNamespace, string(cfg.PodUID)),
		specSummary: SpecSummary(cfg.Spec),
		stopCh:      make(chan struct{}),
		triggerCh:   make(chan struct{}, 1),
		done:        make(chan struct{}),
		state:       StatePending,
	}
	w.publish()
	return w
}

// initialValue is the kubelet's result for a new container instance:
// readiness fails until proven, liveness passes until disproven, startup is
// unknown.
func initialValue(t prober.ProbeType) results.Result {
	switch t {
	case prober.Readiness:
		return results.Failure
	case prober.Liveness:
		return results.Success
	}
	return results.Unknown
}

// Run probes until Stop, ctx's end, or a container that will not run again.
// On return it removes the worker's result and metric series and calls
// OnExit. A second call returns at once.
func (w *Worker) Run(ctx context.Context) {
	if !w.ran.CompareAndSwap(false, true) {
		klog.ErrorS(nil, "Probe worker already ran", w.logKV()...)
		return
	}
	w.cfg.Metrics.workerDelta(w.series, 1)
	defer w.exit()

	period := time.Duration(w.cfg.Spec.PeriodSeconds) * time.Second
	if period <= 0 {
		period = defaultPeriod
	}
	// After a restart of probed every worker starts at once; spread them over
	// a period, as the kubelet does after its own restart.
	if period > w.clock.Since(w.cfg.DaemonStart) {
		jitter := time.Duration(w.cfg.Rand() * float64(period))
		if !w.sleep(ctx, jitter) {
			return
		}
	}
	if w.stopped(ctx) {
		return
	}

	ticks := newSchedule(w.clock, period)
	defer ticks.stop()
	for w.doProbe(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-w.stopCh:
			return
		case <-ticks.C():
			due := ticks.fired()
			w.cfg.Metrics.observeLateness(w.series, w.clock.Since(due).Seconds())
			klog.V(5).InfoS("Periodic probe", w.logKV()...)
		case <-w.triggerCh:
			// Probe again one whole period after a manual run.
			ticks.reset()
			klog.V(4).InfoS("Manual probe run", w.logKV()...)
		}
	}
}

// Stop asks the worker to end. It never blocks, may be called any number of
// times, before, during or after Run; a worker stopped before Run probes
// nothing.
func (w *Worker) Stop() {
	w.stopOnce.Do(func() { close(w.stopCh) })
}

// Trigger asks for a probe now, and restarts the period from it. It never
// blocks; triggers coalesce.
func (w *Worker) Trigger() {
	select {
	case w.triggerCh <- struct{}{}:
	default:
	}
}

// Done is closed when Run has cleaned up and OnExit has returned.
func (w *Worker) Done() <-chan struct{} { return w.done }

// sleep waits d on the worker's clock; false if the worker was stopped.
func (w *Worker) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := w.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-w.triggerCh:
		// Someone needs a result now (a startup probe just succeeded).
		return true
	case <-w.stopCh:
		return false
	case <-ctx.Done():
		return false
	}
}

func (w *Worker) stopped(ctx context.Context) bool {
	select {
	case <-w.stopCh:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// exit forgets the worker's result and series, as the kubelet's run does on
// its way out, then tells the owner.
func (w *Worker) exit() {
	if w.containerID != "" {
		w.cfg.Results.Remove(w.containerID)
	}
	w.cfg.Metrics.deleteSeries(w.series)
	w.cfg.Metrics.workerDelta(w.series, -1)
	w.state = StateStopped
	w.publish()
	klog.V(3).InfoS("Probe worker ended", w.logKV()...)
	if w.cfg.OnExit != nil {
		w.cfg.OnExit()
	}
	close(w.done)
}

// publish copies the loop state for Snapshot.
func (w *Worker) publish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.snap.State = w.state
	w.snap.ContainerID = w.containerID
	w.snap.ResultRun = w.resultRun
	w.snap.LastResult = ""
	if w.counted {
		w.snap.LastResult = resultWord(w.lastResult)
	}
}

func (w *Worker) record(e HistoryEntry) {
	w.mu.Lock()
	w.hist.add(e)
	w.mu.Unlock()
}

func (w *Worker) logKV(kv ...any) []any {
	return append([]any{
		"pod", klog.KRef(w.cfg.PodNamespace, w.cfg.PodName), "podUID", w.cfg.PodUID,
		"containerName", w.cfg.Container.Name, "probeType", w.cfg.ProbeType,
	}, kv...)
}
