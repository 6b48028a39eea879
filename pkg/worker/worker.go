package worker

import (
	"context"
	"math/rand/v2"
	"sync"
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
	// OwnIPs narrows the target's status IPs to the pod's own before each
	// probe and marks them verified; nil hands them to Prober as written,
	// unverified.
	OwnIPs *OwnIPs
	// Liveness hears each liveness success (the restart guard); may be nil.
	Liveness LivenessTracker
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

	// Clock defaults to the real clock; its tickers pace the probes.
	Clock clock.WithTicker
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
	// TLS is the probe's "probed.io/tls" (HTTPS and gRPC); nil: the
	// kubelet's unverified TLS.
	TLS *probespec.TLS
	// Period and Timeout replace the spec's periodSeconds and
	// timeoutSeconds when positive ("probed.io/periodMilliseconds" and
	// "probed.io/timeoutMilliseconds").
	Period, Timeout time.Duration
	// FromPod is the probe's "probed.io/from": "Pod": it is sent from
	// inside the pod's network namespace, which PodNetworks opens; with
	// PodNetworks nil (--pod-network-probes off) such a probe errors.
	FromPod     bool
	PodNetworks *PodNetworks

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
	period  time.Duration
	series  series
	// events is handed to the prober by pointer, so that no sink is boxed
	// per probe; pod is set before each probe.
	events containerEvents

	// stopCh and manualTriggerCh hold one token each, so that Stop and
	// Trigger never block and repeated calls coalesce.
	stopCh          chan struct{}
	manualTriggerCh chan struct{}

	// Loop state, owned by the goroutine running doProbe.
	containerID string
	decided     results.Result // the instance's published result, for ProbeResultChanged
	lastResult  results.Result
	resultRun   int
	onHold      bool
	killPending bool // the last kill failed; retry while the instance runs
	// restartDeferred is why the Killer last held this instance's restart
	// back, until a kill goes through or the instance changes.
	restartDeferred string
	counted         bool // a result has been counted since the worker began
	state           State
	podIPs          []string // the last probe's Target.PodIPs, reused while they hold

	// mu guards what Snapshot reads (a published copy of the loop state and
	// the history) and Run's single start.
	mu     sync.Mutex
	snap   published
	hist   history
	ran    bool
	done   chan struct{} // nil until Done is called
	exited bool

	// session is the prober's per-worker state (request templates, kept
	// connections) for network probes; nil otherwise. Closed in exit.
	session *prober.Session
	// netns is the pod's network namespace, for a FromPod probe.
	netns PodNetns
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
	w := &Worker{
		session:         newSession(cfg.Spec),
		cfg:             cfg,
		initial:         initialValue(cfg.ProbeType),
		period:          probePeriod(cfg),
		series:          newSeries(cfg.ProbeType, cfg.Container.Name, cfg.PodName, cfg.PodNamespace, string(cfg.PodUID)),
		stopCh:          make(chan struct{}, 1),
		manualTriggerCh: make(chan struct{}, 1),
		state:           StatePending,
	}
	w.events.w = w
	w.publish()
	return w
}

// probePeriod is Config.Period if set, else the spec's periodSeconds.
func probePeriod(cfg Config) time.Duration {
	period := time.Duration(cfg.Spec.PeriodSeconds) * time.Second
	if cfg.Period > 0 {
		period = cfg.Period
	}
	if period <= 0 {
		period = defaultPeriod
	}
	return period
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

// Run probes until Stop, ctx's end, or a container that will not run again,
// as the kubelet's worker runs: a start-up jitter, then a probe at once and
// one per tick of a ticker, a manual trigger probing now and restarting the
// ticker. On return it removes the worker's result and metric series and
// calls OnExit. A second call returns at once.
func (w *Worker) Run(ctx context.Context) {
	if !w.begin() {
		w.errorLog(nil, "Probe worker already ran")
		return
	}
	w.cfg.Metrics.workerDelta(&w.series, 1)
	if w.cfg.TLS != nil {
		w.cfg.Metrics.watchTLS(&w.series, w.session)
	}
	defer w.exit()
	ctx = w.withOwner(ctx)
	if !w.startupJitter(ctx) {
		return
	}

	ticker := w.cfg.Clock.NewTicker(w.period)
	defer func() { ticker.Stop() }()
	// due is the ticker's next tick, on its grid, for the lateness metric.
	due := w.cfg.Clock.Now().Add(w.period)
	for !w.stopped(ctx) && w.doProbe(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-w.stopCh:
			return
		case <-ticker.C():
			due = w.ticked(due)
		case <-w.manualTriggerCh:
			// Probe now and again one whole period later, as the kubelet's
			// probeTicker.Reset does (clock.Ticker has no Reset).
			ticker.Stop()
			ticker = w.cfg.Clock.NewTicker(w.period)
			due = w.cfg.Clock.Now().Add(w.period)
			w.vlog(4, "Manual probe run")
		}
	}
}

// begin marks the worker as run; false if it already was.
func (w *Worker) begin() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ran := w.ran
	w.ran = true
	return !ran
}

// startupJitter waits a random part of the period when probed started less
// than a period ago, so that the workers a restart of probed starts all at
// once spread their probes, as the kubelet does after its own restart. A
// trigger, before Run or during the wait, ends it: its probe is the first.
// False if the worker was stopped meanwhile.
func (w *Worker) startupJitter(ctx context.Context) bool {
	if w.stopped(ctx) {
		return false
	}
	select {
	case <-w.manualTriggerCh:
		return true
	default:
	}
	if w.period <= w.cfg.Clock.Since(w.cfg.DaemonStart) {
		return true
	}
	jitter := time.Duration(w.cfg.Rand() * float64(w.period))
	if jitter <= 0 {
		return true
	}
	t := w.cfg.Clock.NewTimer(jitter)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-w.stopCh:
		return false
	case <-t.C():
	case <-w.manualTriggerCh:
	}
	return true
}

// stopped reports whether Stop was called or ctx ended, so that a stop
// wins over a tick that came at the same time.
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

// ticked observes how late a tick was taken against the ticker's grid, and
// returns the next tick's due time. A ticker keeps one late tick and drops
// the ones after it, so the tick taken is the one due at due.
func (w *Worker) ticked(due time.Time) time.Time {
	now := w.cfg.Clock.Now()
	if late := now.Sub(due); late >= 0 {
		w.cfg.Metrics.observeLateness(&w.series, late.Seconds())
		for !due.After(now) {
			due = due.Add(w.period)
		}
	}
	w.vlog(5, "Periodic probe")
	return due
}

// Stop asks the worker to end. It never blocks, may be called any number of
// times, before, during or after Run; a worker stopped before Run probes
// nothing.
func (w *Worker) Stop() {
	select {
	case w.stopCh <- struct{}{}:
	default:
	}
}

// Trigger asks for a probe now, and restarts the period from it. It never
// blocks; triggers coalesce.
func (w *Worker) Trigger() {
	select {
	case w.manualTriggerCh <- struct{}{}:
	default:
	}
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
	w.netns.Close()
	if w.containerID != "" {
		w.cfg.Results.Remove(w.containerID)
	}
	w.cfg.Metrics.deleteSeries(&w.series)
	w.cfg.Metrics.unwatchTLS(&w.series)
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
	state           State
	containerID     string
	resultRun       int
	lastResult      results.Result
	counted         bool
	restartDeferred string
}

// publish copies the loop state for Snapshot.
func (w *Worker) publish() {
	p := published{w.state, w.containerID, w.resultRun, w.lastResult, w.counted, w.restartDeferred}
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

// logKV is the worker's key/values for a log line, then kv.
func (w *Worker) logKV(kv ...any) []any {
	return append([]any{
		"pod", klog.KRef(w.cfg.PodNamespace, w.cfg.PodName), "podUID", w.cfg.PodUID,
		"containerName", w.cfg.Container.Name, "probeType", w.cfg.ProbeType,
	}, kv...)
}

// vlog logs at level with the worker's key/values. Callers on the probe path
// test klog.V first when they pass values, so that nothing is boxed while
// the level is off.
func (w *Worker) vlog(level klog.Level, msg string, kv ...any) {
	if v := klog.V(level); v.Enabled() {
		v.InfoS(msg, w.logKV(kv...)...)
	}
}

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
