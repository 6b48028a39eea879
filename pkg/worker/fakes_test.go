package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

const (
	testUID       = types.UID("pod-uid-1")
	testNamespace = "ns"
	testPodName   = "pod"
	testContainer = "app"
	testID        = "containerd://aaa"
	newID         = "containerd://bbb"
)

// guard bounds every wait on the code under test; behaviour is never timed.
const guard = 10 * time.Second

// recv waits for one value or fails the test.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// fakePods is a PodSource backed by a map.
type fakePods struct {
	mu   sync.Mutex
	pods map[types.UID]*v1.Pod
	hook func() // called on every lookup, to inject panics
}

func (f *fakePods) Pod(uid types.UID) (*v1.Pod, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hook != nil {
		f.hook()
	}
	p, ok := f.pods[uid]
	return p, ok
}

func (f *fakePods) set(p *v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pods == nil {
		f.pods = map[types.UID]*v1.Pod{}
	}
	f.pods[p.UID] = p
}

// fakeProber returns a configurable result and reports each call.
type fakeProber struct {
	mu        sync.Mutex
	result    results.Result
	output    string
	err       error
	panicWith any
	n         int
	target    prober.Target
	events    prober.EventSink

	clock clock.PassiveClock
	calls chan time.Time // the fake time of each call
	gate  chan struct{}  // if set, each call waits for a value
}

func newFakeProber(c clock.PassiveClock) *fakeProber {
	return &fakeProber{result: results.Success, clock: c, calls: make(chan time.Time, 1000)}
}

func (f *fakeProber) Probe(_ context.Context, _ probespec.ProbeType, _ *v1.Probe, target prober.Target, events prober.EventSink) (results.Result, string, error) {
	f.mu.Lock()
	f.n++
	f.target, f.events = target, events
	r, out, err, p, gate := f.result, f.output, f.err, f.panicWith, f.gate
	f.mu.Unlock()
	f.calls <- f.clock.Now()
	if gate != nil {
		<-gate
	}
	if p != nil {
		panic(p)
	}
	return r, out, err
}

func (f *fakeProber) set(r results.Result) {
	f.mu.Lock()
	f.result = r
	f.mu.Unlock()
}

func (f *fakeProber) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// fakeKiller records kills.
type fakeKiller struct {
	mu    sync.Mutex
	kills []killCall
	err   error
}

type killCall struct {
	containerID string
	container   string
	probeType   probespec.ProbeType
	grace       time.Duration
}

func (k *fakeKiller) Kill(_ context.Context, pod *v1.Pod, c *v1.Container, id string, t probespec.ProbeType, spec *v1.Probe) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kills = append(k.kills, killCall{id, c.Name, t, kill.GracePeriod(pod, c.Name, spec)})
	return k.err
}

func (k *fakeKiller) calls() []killCall {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]killCall(nil), k.kills...)
}

// fakeRecorder records events.
type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *fakeRecorder) Event(pod *v1.Pod, container, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, container+" "+eventType+" "+reason+" "+message)
}

func (r *fakeRecorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// stepClock is a FakeClock that reports every timer and ticker it arms
// (NewTimer, Reset and NewTicker), so Run-loop tests step time only once the
// worker waits on it, and counts those not stopped yet.
type stepClock struct {
	*testingclock.FakeClock
	armed chan time.Duration
	live  atomic.Int32
}

func newStepClock(now time.Time) *stepClock {
	return &stepClock{FakeClock: testingclock.NewFakeClock(now), armed: make(chan time.Duration, 1000)}
}

func (c *stepClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.armed <- d
	c.live.Add(1)
	return &stepTimer{Timer: t, c: c}
}

func (c *stepClock) NewTicker(d time.Duration) clock.Ticker {
	t := c.FakeClock.NewTicker(d)
	c.armed <- d
	c.live.Add(1)
	return &stepTicker{Ticker: t, c: c}
}

// idle reports whether every timer and ticker the clock handed out was
// stopped. (FakeClock's HasWaiters cannot tell: its tickers' Stop does
// nothing.)
func (c *stepClock) idle() bool { return c.live.Load() == 0 }

type stepTimer struct {
	clock.Timer
	c       *stepClock
	stopped atomic.Bool
}

func (t *stepTimer) Reset(d time.Duration) bool {
	active := t.Timer.Reset(d)
	t.c.armed <- d
	if t.stopped.CompareAndSwap(true, false) {
		t.c.live.Add(1)
	}
	return active
}

func (t *stepTimer) Stop() bool {
	if t.stopped.CompareAndSwap(false, true) {
		t.c.live.Add(-1)
	}
	return t.Timer.Stop()
}

type stepTicker struct {
	clock.Ticker
	c       *stepClock
	stopped atomic.Bool
}

func (t *stepTicker) Stop() {
	if t.stopped.CompareAndSwap(false, true) {
		t.c.live.Add(-1)
	}
	t.Ticker.Stop()
}

var epoch = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// env is one worker under test with all its fakes.
type env struct {
	clock   *stepClock
	pods    *fakePods
	prober  *fakeProber
	results results.Manager
	killer  *fakeKiller
	rec     *fakeRecorder
	reg     *prometheus.Registry
	metrics *Metrics
	started atomic.Bool
	exits   atomic.Int32
	cfg     Config
}

// defaulted fills the API defaults into p and gives it an exec handler.
func defaulted(p v1.Probe) *v1.Probe {
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.Exec == nil && p.HTTPGet == nil && p.TCPSocket == nil && p.GRPC == nil {
		p.Exec = &v1.ExecAction{Command: []string{"true"}}
	}
	return &p
}

// newEnv builds a worker whose container counts as started for liveness and
// readiness, and not yet for startup, so that each probe type runs.
func newEnv(t testing.TB, pt probespec.ProbeType, spec v1.Probe, opts ...func(*Config)) (*env, *Worker) {
	t.Helper()
	e := &env{
		clock:   newStepClock(epoch),
		pods:    &fakePods{},
		results: results.NewManager(),
		killer:  &fakeKiller{},
		rec:     &fakeRecorder{},
		reg:     prometheus.NewRegistry(),
	}
	e.prober = newFakeProber(e.clock)
	e.metrics = NewMetrics(e.reg)
	e.started.Store(pt != probespec.Startup)
	e.cfg = Config{
		PodUID:       testUID,
		PodNamespace: testNamespace,
		PodName:      testPodName,
		Container:    &v1.Container{Name: testContainer, Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
		ProbeType:    pt,
		Spec:         defaulted(spec),
		Prober:       e.prober,
		Pods:         e.pods,
		Results:      e.results,
		Recorder:     e.rec,
		Killer:       e.killer,
		Started:      func(*v1.Pod, *v1.ContainerStatus) bool { return e.started.Load() },
		Clock:        e.clock,
		DaemonStart:  epoch.Add(-time.Hour),
		Rand:         func() float64 { return 0.5 },
		Metrics:      e.metrics,
		OnExit:       func() { e.exits.Add(1) },
	}
	for _, o := range opts {
		o(&e.cfg)
	}
	return e, New(e.cfg)
}

// runningPod is a Running pod whose container started at startedAt.
func runningPod(startedAt time.Time) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: testUID, Namespace: testNamespace, Name: testPodName},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: testContainer}},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning,
			PodIP: "10.0.0.7",
			ContainerStatuses: []v1.ContainerStatus{{
				Name:        testContainer,
				ContainerID: testID,
				State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}},
			}},
		},
	}
}

// withID returns a copy of pod whose container has another ID.
func withID(pod *v1.Pod, id string) *v1.Pod {
	p := pod.DeepCopy()
	p.Status.ContainerStatuses[0].ContainerID = id
	return p
}

func (e *env) result(t *testing.T, id string) (results.Result, bool) {
	t.Helper()
	v, ok := e.results.Get(id)
	return v.Result, ok
}

func expectResult(t *testing.T, e *env, id string, want results.Result, msg string) {
	t.Helper()
	v, ok := e.results.Get(id)
	if !ok {
		t.Fatalf("%s: no result cached for %s, want %v", msg, id, want)
	}
	if got := v.Result; got != want {
		t.Fatalf("%s: result = %v, want %v", msg, got, want)
	}
}

func expectContinue(t *testing.T, w *Worker, msg string) {
	t.Helper()
	if !w.doProbe(context.Background()) {
		t.Fatalf("%s: doProbe stopped the worker, want it to go on", msg)
	}
}
