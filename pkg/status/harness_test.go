package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/kubeclient/fromclientset"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

var (
	podsGVR = v1.SchemeGroupVersion.WithResource("pods")
	t0      = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	webKey  = PodKey{Namespace: "ns", Name: "web", UID: "uid-web"}
)

// webPod has two running containers and conditions that belong to others.
func webPod() *v1.Pod {
	since := metav1.NewTime(t0.Add(-time.Hour))
	run := func(name string) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, ContainerID: "containerd://" + name, Ready: true, Started: ptrTo(true),
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: since}}}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: webKey.Namespace, Name: webKey.Name, UID: webKey.UID, ResourceVersion: "1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app"}, {Name: "db"}}},
		Status: v1.PodStatus{
			Phase: v1.PodRunning,
			Conditions: []v1.PodCondition{
				{Type: "example.com/other", Status: v1.ConditionTrue, Reason: "Theirs", LastTransitionTime: since},
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: since},
			},
			ContainerStatuses: []v1.ContainerStatus{run("app"), run("db")},
		},
	}
}

// readiness builds a PodState with one readiness probe per named container;
// ok[i] says whether container i is ready.
func readiness(msg string, names []string, ok ...bool) PodState {
	var s PodState
	for i, n := range names {
		reason := ReasonProbeFailed
		if ok[i] {
			reason = ReasonProbeSucceeded
		}
		s.Containers = append(s.Containers, ContainerState{Name: n, Started: true,
			HasReadiness: true, Ready: ok[i], ReadyReason: reason, ReadyMessage: msg})
	}
	return s
}

func appReady(ok bool, msg string) PodState { return readiness(msg, []string{"app"}, ok) }

// cache is a PodGetter over the fake clientset's objects, as an informer
// that is always up to date; freeze makes it lag.
type cache struct {
	mu     sync.Mutex
	cs     *fake.Clientset
	frozen map[types.UID]*v1.Pod
	gone   map[types.UID]bool
}

func (c *cache) Pod(uid types.UID) (*v1.Pod, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone[uid] {
		return nil, false
	}
	if p, ok := c.frozen[uid]; ok {
		return p, true
	}
	list, err := c.cs.Tracker().List(podsGVR, v1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		return nil, false
	}
	for _, p := range list.(*v1.PodList).Items {
		if p.UID == uid {
			return p.DeepCopy(), true
		}
	}
	return nil, false
}

// freeze pins the pod as it is now: later writes do not reach the cache.
func (c *cache) freeze(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen[pod.UID] = pod.DeepCopy()
}

func (c *cache) remove(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone[uid] = true
}

type harness struct {
	t       *testing.T
	cs      *fake.Clientset
	cache   *cache
	clock   *testingclock.FakeClock
	reg     *prometheus.Registry
	metrics *Metrics
	w       *Writer

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newHarness(t *testing.T, opts Options, pods ...*v1.Pod) *harness {
	t.Helper()
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p)
	}
	h := &harness{t: t, cs: fake.NewClientset(objs...), clock: testingclock.NewFakeClock(t0), reg: prometheus.NewRegistry()}
	h.cache = &cache{cs: h.cs, frozen: map[types.UID]*v1.Pod{}, gone: map[types.UID]bool{}}
	h.metrics = NewMetrics(h.reg)
	opts.Client, opts.Pods, opts.Clock, opts.Metrics = fromclientset.New(h.cs), h.cache, h.clock, h.metrics
	w, err := NewWriter(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.w = w
	h.ctx, h.cancel = context.WithCancel(context.Background())
	t.Cleanup(h.stop)
	return h
}

// start runs the sync loop until the test ends or stop is called.
func (h *harness) start() {
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		h.w.Run(h.ctx)
	}()
	h.waitFor("Run to start", func() bool { return h.clock.Waiters() >= idleWaiters })
}

// stop cancels Run and waits for it to return (after its flush).
func (h *harness) stop() {
	h.cancel()
	if h.done != nil {
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			h.t.Fatal("Run did not return")
		}
	}
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		h.t.Fatalf("timed out waiting for %s", what)
	}
}

// settle waits until no pod is pending.
func (h *harness) settle() {
	h.t.Helper()
	h.waitFor("no pending pods", func() bool { return testutil.ToFloat64(h.metrics.pending) == 0 })
}

// heartbeat advances the clock to the next resync tick (one Resync after
// the previous one) and waits until that resync is done and its writes have
// settled.
func (h *harness) heartbeat() {
	h.t.Helper()
	h.heartbeatAfter(h.w.opts.Resync)
}

// heartbeatAfter is heartbeat for a clock that was already stepped by part
// of the period: d is what is left of it.
func (h *harness) heartbeatAfter(d time.Duration) {
	h.t.Helper()
	n := h.w.heartbeats.Load()
	h.waitFor("the heartbeat ticker", func() bool { return h.clock.HasWaiters() })
	h.clock.Step(d)
	h.waitFor("a heartbeat", func() bool { return h.w.heartbeats.Load() > n })
	h.settle()
}

// writes counts status writes (apply or patch on pods/status).
func (h *harness) writes() int {
	n := 0
	for _, a := range h.cs.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func (h *harness) lastWrite() clienttesting.PatchActionImpl {
	h.t.Helper()
	acts := h.cs.Actions()
	for i := len(acts) - 1; i >= 0; i-- {
		if p, ok := acts[i].(clienttesting.PatchActionImpl); ok && p.GetSubresource() == "status" {
			return p
		}
	}
	h.t.Fatal("no status write")
	return clienttesting.PatchActionImpl{}
}

func (h *harness) pod(name string) *v1.Pod {
	h.t.Helper()
	obj, err := h.cs.Tracker().Get(podsGVR, "ns", name)
	if err != nil {
		h.t.Fatal(err)
	}
	return obj.(*v1.Pod)
}

func (h *harness) count(outcome string) int {
	return int(testutil.ToFloat64(h.metrics.writes.WithLabelValues(outcome)))
}

// mutate changes a pod as a concurrent writer would, bumping its
// resourceVersion.
func (h *harness) mutate(name string, f func(*v1.Pod)) {
	h.t.Helper()
	p := h.pod(name)
	f(p)
	p.ResourceVersion = bump(p.ResourceVersion)
	if err := h.cs.Tracker().Update(podsGVR, p, "ns"); err != nil {
		h.t.Fatal(err)
	}
}

func bump(rv string) string {
	n, _ := strconv.Atoi(rv)
	return strconv.Itoa(n + 1)
}

// enforceResourceVersion makes strategic merge patches on pods/status behave
// as on a real API server: a patch carrying a stale metadata.resourceVersion
// fails with a Conflict, and every write bumps the resourceVersion. before,
// if set, runs first on each patch (a concurrent writer).
func (h *harness) enforceResourceVersion(before func()) {
	h.cs.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchActionImpl)
		if pa.GetSubresource() != "status" || pa.GetPatchType() != types.StrategicMergePatchType {
			return false, nil, nil
		}
		if before != nil {
			before()
		}
		obj, err := h.cs.Tracker().Get(podsGVR, pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*v1.Pod)
		var pre struct {
			Metadata struct {
				ResourceVersion string    `json:"resourceVersion"`
				UID             types.UID `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &pre); err != nil {
			return true, nil, err
		}
		if pre.Metadata.ResourceVersion != cur.ResourceVersion || pre.Metadata.UID != cur.UID {
			return true, nil, apierrors.NewConflict(v1.Resource("pods"), cur.Name, errors.New("the object has been modified"))
		}
		orig, _ := json.Marshal(cur)
		merged, err := strategicpatch.StrategicMergePatch(orig, pa.GetPatch(), &v1.Pod{})
		if err != nil {
			return true, nil, err
		}
		out := &v1.Pod{}
		if err := json.Unmarshal(merged, out); err != nil {
			return true, nil, err
		}
		out.ResourceVersion = bump(cur.ResourceVersion)
		if err := h.cs.Tracker().Update(podsGVR, out, out.Namespace); err != nil {
			return true, nil, err
		}
		return true, out, nil
	})
}

// failWrites makes the first n status writes fail with err; it returns a
// counter of all status write attempts.
func (h *harness) failWrites(n int, err error) *attempts {
	at := &attempts{}
	h.cs.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		if at.inc() <= n {
			return true, nil, err
		}
		return false, nil, nil
	})
	return at
}

type attempts struct {
	mu sync.Mutex
	n  int
}

func (a *attempts) inc() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	return a.n
}

func (a *attempts) get() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// retryAt returns when the pod's next retry is due, once it is in backoff
// and the queue's timer for it is set (stepping the clock before that would
// set the timer late).
func (h *harness) retryAt(uid types.UID) time.Time {
	h.t.Helper()
	var at time.Time
	h.waitFor("a backoff", func() bool {
		h.w.mu.Lock()
		defer h.w.mu.Unlock()
		at = time.Time{}
		if e, ok := h.w.pods[uid]; ok {
			at = e.retryAt
		}
		if h.w.outage.active() && h.w.outage.notBefore.After(at) {
			at = h.w.outage.notBefore
		}
		return at.After(h.clock.Now()) && h.armed()
	})
	return at
}

// expectRetries checks that the pod's next retries come after each of the
// delays in turn, and not before, as at counts them.
func (h *harness) expectRetries(uid types.UID, at *attempts, delays ...time.Duration) {
	h.t.Helper()
	for i, delay := range delays {
		due := h.retryAt(uid)
		if got := due.Sub(h.clock.Now()); got != delay {
			h.t.Errorf("retry %d in %v, want %v", i+1, got, delay)
		}
		h.clock.Step(delay - time.Millisecond)
		if got := at.get(); got != i+1 {
			h.t.Fatalf("retried before the backoff expired: attempts = %d", got)
		}
		h.clock.Step(time.Millisecond)
		h.waitFor("a retry", func() bool { return at.get() == i+2 })
	}
}

// numberedPods are n copies of webPod named web-0… with UIDs uid-0….
func numberedPods(n int) []*v1.Pod {
	pods := make([]*v1.Pod, 0, n)
	for i := range n {
		p := webPod()
		p.Name, p.UID = fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
		pods = append(pods, p)
	}
	return pods
}

func keyOf(p *v1.Pod) PodKey { return PodKey{Namespace: p.Namespace, Name: p.Name, UID: p.UID} }

// allReady reports whether probed's condition for container app is True
// on every pod.
func (h *harness) allReady(pods []*v1.Pod) bool {
	for _, p := range pods {
		if c := cond(h.pod(p.Name), ReadyConditionType("app")); c == nil || c.Status != v1.ConditionTrue {
			return false
		}
	}
	return true
}

func (h *harness) outageActive() bool {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	return h.w.outage.active()
}

// idleWaiters are the fake clock's waiters of a running writer with no pod
// backing off: the heartbeat's ticker and the delaying queue's.
const idleWaiters = 2

// armed reports whether the delaying queue's timer for a pod backing off is
// set.
func (h *harness) armed() bool { return h.clock.Waiters() > idleWaiters }

func cond(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	return findCondition(p.Status.Conditions, t)
}

// gate blocks the next status write once armed, until released.
type gate struct {
	t       *testing.T
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	open    chan struct{}
}

func (h *harness) gateWrites() *gate {
	g := &gate{t: h.t}
	h.cs.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		g.mu.Lock()
		armed, entered, open := g.armed, g.entered, g.open
		g.armed = false
		g.mu.Unlock()
		if armed {
			close(entered)
			<-open
		}
		return false, nil, nil
	})
	return g
}

func (g *gate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.entered, g.open = true, make(chan struct{}), make(chan struct{})
}

func (g *gate) waitEntered() {
	g.t.Helper()
	g.mu.Lock()
	entered := g.entered
	g.mu.Unlock()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		g.t.Fatal("no write reached the gate")
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}
