package kill

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/internal/informertest"
	"github.com/probed-dev/probed/pkg/probespec"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestBudgetTokenBucket(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(epoch)
	b := NewBudget(3, clk)
	// Starts full: a burst of 3.
	for i := range 3 {
		if !b.Take("ns").OK {
			t.Fatalf("take %d refused from a full bucket", i+1)
		}
	}
	if b.Take("ns").OK {
		t.Fatal("4th take in the same instant allowed")
	}
	// 3 a minute is one every 20s.
	clk.SetTime(epoch.Add(19 * time.Second))
	if b.Take("ns").OK {
		t.Fatal("allowed after 19s")
	}
	clk.SetTime(epoch.Add(20 * time.Second))
	if !b.Take("ns").OK {
		t.Fatal("refused after 20s")
	}
	if b.Take("ns").OK {
		t.Fatal("two allowed after 20s")
	}
	// A long quiet spell refills to the burst, no more.
	clk.SetTime(epoch.Add(time.Hour))
	if got := b.Available(); got != 3 {
		t.Fatalf("available after an hour = %d; want 3", got)
	}
	for range 3 {
		b.Take("ns")
	}
	if b.Take("ns").OK {
		t.Fatal("bucket exceeded its burst")
	}
	// A clock stepping back never mints tokens.
	clk.SetTime(epoch)
	if b.Take("ns").OK {
		t.Fatal("allowed after the clock went back")
	}

	// 10 a minute, the default: exactly one every 6s, with float rounding.
	b = NewBudget(10, clk)
	for range 10 {
		b.Take("ns")
	}
	for i := 1; i <= 20; i++ {
		clk.SetTime(epoch.Add(time.Duration(i) * 6 * time.Second))
		if !b.Take("ns").OK {
			t.Fatalf("refused at %ds", i*6)
		}
		if b.Take("ns").OK {
			t.Fatalf("two allowed at %ds", i*6)
		}
	}
}

func TestBudgetUnlimited(t *testing.T) {
	for _, n := range []int{0, -1} {
		b := NewBudget(n, nil)
		if b != nil {
			t.Fatalf("NewBudget(%d) = %v; want nil (unlimited)", n, b)
		}
		for range 1000 {
			if !b.Take("ns").OK {
				t.Fatal("unlimited budget refused")
			}
		}
	}
}

// pods is a fake OwnedPods.
type pods struct {
	mu sync.Mutex
	by map[types.UID][]*v1.Pod
}

func (p *pods) owned(uid types.UID) []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*v1.Pod(nil), p.by[uid]...)
}

func (p *pods) add(pod *v1.Pod) *v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ref := metav1.GetControllerOf(pod); ref != nil {
		p.by[ref.UID] = append(p.by[ref.UID], pod)
	}
	return pod
}

func ownedPod(name, kind, apiVersion, owner string) *v1.Pod {
	yes := true
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)}}
	p.Status.Phase = v1.PodRunning
	if kind != "" {
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: apiVersion, Kind: kind, Name: owner, UID: types.UID(kind + "-" + owner), Controller: &yes,
		}}
	}
	return p
}

func rsPod(name string) *v1.Pod { return ownedPod(name, "ReplicaSet", "apps/v1", "web") }

func newPods() *pods { return &pods{by: map[types.UID][]*v1.Pod{}} }

func TestWorkloadGuardDecisions(t *testing.T) {
	ps := newPods()
	reg := prometheus.NewRegistry()
	w := NewWorkloads(ps.owned, NewMetrics(reg), 0, nil)
	var web []*v1.Pod
	for _, n := range []string{"web-1", "web-2", "web-3", "web-4"} {
		web = append(web, ps.add(rsPod(n)))
	}
	expect := func(d Decision, failing, total int, paused bool) {
		t.Helper()
		if !d.Guarded || d.Failing != failing || d.Total != total || d.Paused != paused {
			t.Fatalf("decision = %+v; want guarded, %d of %d, paused=%v", d, failing, total, paused)
		}
	}
	gauge := func() float64 {
		return testutil.ToFloat64(w.metrics.paused)
	}

	// Up to half may be restarted...
	expect(w.Failing(web[0], "app"), 1, 4, false)
	expect(w.Failing(web[1], "app"), 2, 4, false)
	// ...and a second container of the same pod does not count twice.
	expect(w.Failing(web[1], "sidecar"), 2, 4, false)
	// More than half: paused.
	d := w.Failing(web[2], "app")
	expect(d, 3, 4, true)
	if want := "liveness failing on 3 of 4 pods of ReplicaSet ns/web on this node; pausing restarts"; d.Message() != want {
		t.Errorf("message = %q; want %q", d.Message(), want)
	}
	expect(w.Failing(web[3], "app"), 4, 4, true)
	if p := w.Paused(); len(p) != 1 || p[0].String() != "ReplicaSet ns/web" || gauge() != 1 {
		t.Fatalf("paused = %v, gauge %v", p, gauge())
	}

	// Restarted pods count until a liveness probe passes again.
	w.LivenessPassed(web[0].UID, "app")
	expect(w.Failing(web[3], "app"), 3, 4, true)
	// web-2 has two failing containers: one passing is not enough.
	w.LivenessPassed(web[1].UID, "app")
	expect(w.Failing(web[3], "app"), 3, 4, true)
	w.LivenessPassed(web[1].UID, "sidecar")
	if len(w.Paused()) != 0 || gauge() != 0 {
		t.Fatalf("still paused with 2 of 4 failing: %v", w.Paused())
	}
	// The condition cleared: the next kill goes ahead.
	expect(w.Failing(web[3], "app"), 2, 4, false)

	// Pods being deleted or finished are not counted, failing or not.
	now := metav1.Now()
	web[0].DeletionTimestamp = &now
	web[1].Status.Phase = v1.PodFailed
	expect(w.Failing(web[2], "app"), 2, 2, true)
	w.ForgetPod(web[3].UID)
	expect(w.Failing(web[2], "app"), 1, 2, false)
}

func TestWorkloadGuardScope(t *testing.T) {
	ps := newPods()
	w := NewWorkloads(ps.owned, nil, 0, nil)
	// Pods of no controller, or of one that is not a ReplicaSet, StatefulSet
	// or DaemonSet of apps/v1, are not guarded.
	for _, p := range []*v1.Pod{
		ownedPod("bare", "", "", ""),
		ps.add(ownedPod("job-a", "Job", "batch/v1", "j")),
		ps.add(ownedPod("job-b", "Job", "batch/v1", "j")),
		ps.add(ownedPod("crd-a", "ReplicaSet", "example.com/v1", "x")),
		ps.add(ownedPod("crd-b", "ReplicaSet", "example.com/v1", "x")),
	} {
		if d := w.Failing(p, "app"); d.Guarded || d.Paused {
			t.Errorf("%s: %+v; want unguarded", p.Name, d)
		}
	}
	// A workload with one pod on this node is not guarded.
	solo := ps.add(ownedPod("solo", "StatefulSet", "apps/v1", "db"))
	if d := w.Failing(solo, "app"); d.Guarded || d.Paused || d.Total != 1 {
		t.Errorf("single pod: %+v; want unguarded", d)
	}
	// Two pods: one may restart, not both.
	ds1 := ps.add(ownedPod("ds-1", "DaemonSet", "apps/v1", "agent"))
	ds2 := ps.add(ownedPod("ds-2", "DaemonSet", "apps/v1", "agent"))
	if d := w.Failing(ds1, "app"); !d.Guarded || d.Paused {
		t.Errorf("1 of 2: %+v", d)
	}
	if d := w.Failing(ds2, "app"); !d.Paused || d.Message() != "liveness failing on 2 of 2 pods of DaemonSet ns/agent on this node; pausing restarts" {
		t.Errorf("2 of 2: %+v %q", d, d.Message())
	}
	// A pod the cache has not caught up with still counts itself.
	late := rsPod("late")
	if d := w.Failing(late, "app"); d.Total != 1 || d.Failing != 1 || d.Guarded {
		t.Errorf("uncached pod: %+v", d)
	}
}

func TestIndexByController(t *testing.T) {
	client := fake.NewClientset()
	watching := informertest.WatchStarted(client, "pods")
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Pods().Informer()
	owned, err := IndexByController(inf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	informertest.Wait(t, watching)
	for _, p := range []*v1.Pod{rsPod("a"), rsPod("b"), ownedPod("c", "ReplicaSet", "apps/v1", "other"), ownedPod("d", "", "", "")} {
		if _, err := client.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The informer delivers the four creations in turn: wait for all of
	// them (the last one's pod has no controller), then check the index.
	deadline := time.Now().Add(5 * time.Second)
	for len(inf.GetStore().List()) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the informer has %d of 4 pods", len(inf.GetStore().List()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(owned("ReplicaSet-web")); n != 2 {
		t.Errorf("owned(web) = %d; want 2", n)
	}
	if n := len(owned("ReplicaSet-other")); n != 1 {
		t.Errorf("owned(other) = %d; want 1", n)
	}
}

// fakeKiller counts kills.
type fakeKiller struct {
	mu    sync.Mutex
	kills []string
}

func (f *fakeKiller) Kill(_ context.Context, pod *v1.Pod, c *v1.Container, id string, _ probespec.ProbeType, _ *v1.Probe) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kills = append(f.kills, pod.Name+"/"+c.Name)
	return nil
}

func (f *fakeKiller) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.kills)
}

type event struct{ pod, container, eventType, reason, message string }

type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) Event(pod *v1.Pod, c, t, reason, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{pod.Name, c, t, reason, msg})
}

func (r *recorder) byReason(reason string) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event
	for _, e := range r.events {
		if e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func deferred(t *testing.T, err error, reason string, reprobe bool) {
	t.Helper()
	d, ok := AsDeferred(err)
	if !ok || d.Reason != reason || d.Reprobe != reprobe {
		t.Fatalf("Kill = %v; want deferred for %s (reprobe %v)", err, reason, reprobe)
	}
	if !strings.HasPrefix(err.Error(), "restart deferred: ") {
		t.Errorf("error text %q", err)
	}
}

func TestKillerBudget(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	inner := &fakeKiller{}
	rec := &recorder{}
	reg := prometheus.NewRegistry()
	k := &Guard{Inner: inner, Budget: NewBudget(2, clk), Recorder: rec, Metrics: NewMetrics(reg), Clock: clk}
	ctx := context.Background()
	app := &v1.Container{Name: "app"}
	kill := func(pod string, t probespec.ProbeType) error {
		return k.Kill(ctx, ownedPod(pod, "", "", ""), app, "containerd://"+pod, t, &v1.Probe{})
	}
	if err := kill("a", probespec.Liveness); err != nil {
		t.Fatal(err)
	}
	if err := kill("b", probespec.Startup); err != nil {
		t.Fatal(err)
	}
	// Over budget: deferred, reported once however often the worker retries.
	for range 5 {
		deferred(t, kill("c", probespec.Liveness), DeferBudget, false)
	}
	evs := rec.byReason(ReasonRestartBudgetExceeded)
	if len(evs) != 1 || evs[0].eventType != v1.EventTypeWarning || evs[0].container != "app" ||
		evs[0].message != "the node's restart budget of 2 per minute is spent; restart of container app after its liveness probe failure deferred" {
		t.Fatalf("events = %+v", evs)
	}
	if got := testutil.ToFloat64(k.Metrics.deferred.WithLabelValues(DeferBudget)); got != 1 {
		t.Errorf("deferred{budget} = %v; want 1", got)
	}
	if inner.count() != 2 {
		t.Fatalf("%d kills; want 2", inner.count())
	}
	// 30s later a token is back; the retry goes through.
	clk.Step(30 * time.Second)
	if err := kill("c", probespec.Liveness); err != nil {
		t.Fatalf("retry after refill: %v", err)
	}
	if inner.count() != 3 {
		t.Fatalf("%d kills; want 3", inner.count())
	}
	// A later deferral of the same container is a new episode, reported anew.
	deferred(t, kill("c", probespec.Liveness), DeferBudget, false)
	if n := len(rec.byReason(ReasonRestartBudgetExceeded)); n != 2 {
		t.Errorf("%d budget events; want 2", n)
	}
	// So is one after 10 minutes without an attempt.
	clk.Step(11 * time.Minute)
	k.Budget = NewBudget(1, clk)
	k.Budget.Take("ns")
	deferred(t, kill("c", probespec.Liveness), DeferBudget, false)
	if n := len(rec.byReason(ReasonRestartBudgetExceeded)); n != 3 {
		t.Errorf("%d budget events; want 3", n)
	}
}

func TestKillerWorkloadGuard(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	ps := newPods()
	inner := &fakeKiller{}
	rec := &recorder{}
	m := NewMetrics(prometheus.NewRegistry())
	k := &Guard{Inner: inner, Budget: NewBudget(10, clk), Workloads: NewWorkloads(ps.owned, m, 0, nil), Recorder: rec, Metrics: m, Clock: clk}
	web := []*v1.Pod{ps.add(rsPod("web-1")), ps.add(rsPod("web-2")), ps.add(rsPod("web-3"))}
	ctx := context.Background()
	app := &v1.Container{Name: "app"}
	kill := func(p *v1.Pod, t probespec.ProbeType) error {
		return k.Kill(ctx, p, app, "containerd://"+p.Name, t, &v1.Probe{})
	}
	if err := kill(web[0], probespec.Liveness); err != nil {
		t.Fatal(err)
	}
	// 2 of 3 failing: paused, and the kill is cancelled for a fresh probe.
	deferred(t, kill(web[1], probespec.Liveness), DeferWorkloadGuard, true)
	deferred(t, kill(web[1], probespec.Liveness), DeferWorkloadGuard, true)
	evs := rec.byReason(ReasonRestartsPaused)
	if len(evs) != 1 || evs[0].pod != "web-2" || evs[0].eventType != v1.EventTypeWarning ||
		evs[0].message != "liveness failing on 2 of 3 pods of ReplicaSet ns/web on this node; pausing restarts" {
		t.Fatalf("events = %+v", evs)
	}
	if got := testutil.ToFloat64(m.deferred.WithLabelValues(DeferWorkloadGuard)); got != 1 {
		t.Errorf("deferred{workload_guard} = %v; want 1", got)
	}
	if got := testutil.ToFloat64(m.paused); got != 1 {
		t.Errorf("paused workloads = %v; want 1", got)
	}
	// A paused kill spends no budget.
	if got := k.Budget.Available(); got != 9 {
		t.Errorf("budget left = %d; want 9", got)
	}
	// Startup failures are not the workload guard's business.
	if err := kill(web[2], probespec.Startup); err != nil {
		t.Errorf("startup kill during a pause: %v", err)
	}
	// web-1 comes back healthy: the pause lifts and web-2's next attempt restarts it.
	k.Workloads.LivenessPassed(web[0].UID, "app")
	if got := testutil.ToFloat64(m.paused); got != 0 {
		t.Errorf("paused workloads = %v after recovery; want 0", got)
	}
	if err := kill(web[1], probespec.Liveness); err != nil {
		t.Fatalf("kill after the pause lifted: %v", err)
	}
	if want := []string{"web-1/app", "web-3/app", "web-2/app"}; strings.Join(inner.kills, ",") != strings.Join(want, ",") {
		t.Errorf("kills = %v; want %v", inner.kills, want)
	}
}

// The first restarted replica never recovers, so half the workload keeps
// counting as failing: without a bound the guard would hold the others'
// kills forever, where the kubelet restarts them. After maxPause the kills
// go ahead; the pause ends when the majority does, and a later majority
// starts a new, again bounded, pause.
func TestWorkloadGuardPauseIsBounded(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	ps := newPods()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	w := NewWorkloads(ps.owned, m, 5*time.Minute, clk)
	web := []*v1.Pod{ps.add(rsPod("web-1")), ps.add(rsPod("web-2")), ps.add(rsPod("web-3"))}

	if d := w.Failing(web[0], "app"); d.Paused {
		t.Fatalf("first failure paused: %+v", d)
	}
	if d := w.Failing(web[1], "app"); !d.Paused || d.Expired {
		t.Fatalf("majority not paused: %+v", d)
	}
	clk.Step(5*time.Minute - time.Second)
	if d := w.Failing(web[1], "app"); !d.Paused {
		t.Fatalf("released before maxPause: %+v", d)
	}
	clk.Step(time.Second)
	d := w.Failing(web[1], "app")
	if d.Paused || !d.Expired {
		t.Fatalf("still paused after maxPause: %+v", d)
	}
	if got := testutil.ToFloat64(m.paused); got != 0 || len(w.Paused()) != 0 {
		t.Errorf("an expired pause counts as paused (gauge %v, %v)", got, w.Paused())
	}
	if d := w.Failing(web[2], "app"); d.Paused || !d.Expired {
		t.Fatalf("another replica held after maxPause: %+v", d)
	}
	// Everyone recovers: the pause is over, and the next majority starts a
	// fresh one.
	for _, p := range web {
		w.LivenessPassed(p.UID, "app")
	}
	w.Failing(web[0], "app")
	if d := w.Failing(web[1], "app"); !d.Paused || d.Expired {
		t.Fatalf("a new majority after recovery: %+v; want a fresh pause", d)
	}
}

func TestAsDeferred(t *testing.T) {
	if _, ok := AsDeferred(errors.New("x")); ok {
		t.Error("plain error taken for a deferral")
	}
	wrapped := errors.Join(errors.New("ctx"), &DeferredError{Reason: DeferBudget, Message: "m"})
	if d, ok := AsDeferred(wrapped); !ok || d.Reason != DeferBudget {
		t.Errorf("wrapped deferral not found: %v", wrapped)
	}
	// The worker, which cannot import this package, tells a deferral by
	// its Deferred method.
	var marked interface{ Deferred() bool }
	if !errors.As(wrapped, &marked) || !marked.Deferred() {
		t.Error("a deferral does not say Deferred()")
	}
}

// TestMetricsLint: the restart guard's metrics pass the Prometheus linter,
// and are present from the start.
func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, mf := range mfs {
		names[mf.GetName()] = len(mf.GetMetric())
	}
	if names["probed_restarts_deferred_total"] != 3 || names["probed_restarts_paused_workloads"] != 1 || names["probed_restarts_pdb_unchecked_total"] != 1 {
		t.Errorf("series at start: %v", names)
	}
	m.countDeferred(DeferBudget)
	m.setPaused(2)
	mfs, _ = reg.Gather()
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
