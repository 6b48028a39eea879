package status

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/kubeclient/fromclientset"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
)

func TestWriterOneWritePerTransition(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	h.start()

	h.w.Set(webKey, appReady(false, "connection refused"))
	h.settle()
	if got := h.writes(); got != 1 {
		t.Fatalf("writes = %d, want 1", got)
	}
	act := h.lastWrite()
	if act.GetPatchType() != types.ApplyPatchType || act.PatchOptions.FieldManager != FieldManager ||
		act.PatchOptions.Force == nil || !*act.PatchOptions.Force {
		t.Errorf("write is not a forced server-side apply by %q: %s %+v", FieldManager, act.GetPatchType(), act.PatchOptions)
	}
	p := h.pod("web")
	if c := cond(p, "ready.probed.io/app"); c == nil || c.Status != v1.ConditionFalse || c.Reason != ReasonProbeFailed ||
		c.Message != "connection refused" || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("ready.probed.io/app = %+v", c)
	}
	if c := cond(p, PodReadyCondition); c == nil || c.Status != v1.ConditionFalse || c.Reason != ReasonContainersNotReady {
		t.Errorf("probed.io/ready = %+v", c)
	}

	// The same state, and a message-only change: no write.
	h.w.Set(webKey, appReady(false, "connection refused"))
	h.w.Set(webKey, appReady(false, "timeout"))
	h.settle()
	if got := h.writes(); got != 1 {
		t.Fatalf("writes after repeats = %d, want 1", got)
	}

	// A transition: one write, with the latest message and a new time.
	h.clock.Step(10 * time.Second)
	h.w.Set(webKey, appReady(true, "ok"))
	h.settle()
	if got := h.writes(); got != 2 {
		t.Fatalf("writes after transition = %d, want 2", got)
	}
	p = h.pod("web")
	if c := cond(p, "ready.probed.io/app"); c.Status != v1.ConditionTrue || c.Message != "ok" || !c.LastTransitionTime.Time.Equal(t0.Add(10*time.Second)) {
		t.Errorf("ready.probed.io/app = %+v", c)
	}
	if c := cond(p, PodReadyCondition); c.Status != v1.ConditionTrue || c.Reason != ReasonAllProbesSucceeded {
		t.Errorf("probed.io/ready = %+v", c)
	}
	// Others' conditions are untouched.
	if c := cond(p, "example.com/other"); c == nil || c.Reason != "Theirs" {
		t.Errorf("someone else's condition changed: %+v", c)
	}
	if c := cond(p, v1.PodReady); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("kubelet's Ready changed: %+v", c)
	}

	// A reason-only change is a write; lastTransitionTime stays.
	h.clock.Step(10 * time.Second)
	st := appReady(false, "")
	st.Containers[0].ReadyReason = ReasonContainerNotRunning
	h.w.Set(webKey, appReady(false, "x"))
	h.settle()
	h.clock.Step(10 * time.Second)
	h.w.Set(webKey, st)
	h.settle()
	if got := h.writes(); got != 4 {
		t.Fatalf("writes = %d, want 4", got)
	}
	if c := cond(h.pod("web"), "ready.probed.io/app"); c.Reason != ReasonContainerNotRunning || !c.LastTransitionTime.Time.Equal(t0.Add(20*time.Second)) {
		t.Errorf("after reason-only change: %+v", c)
	}
	if got := h.count(OutcomeSuccess); got != 4 {
		t.Errorf("success count = %d, want 4", got)
	}
	if n := testutil.CollectAndCount(h.metrics.duration); n != 1 {
		t.Errorf("duration histogram series = %d", n)
	}
}

func TestWriterCoalesces(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	// Many Sets before the loop runs: one write, of the last state.
	for i := 0; i < 50; i++ {
		h.w.Set(webKey, appReady(i%2 == 0, "flap"))
	}
	h.w.Set(webKey, appReady(true, "final"))
	if got := testutil.ToFloat64(h.metrics.pending); got != 1 {
		t.Errorf("pending gauge = %v, want 1", got)
	}
	h.start()
	h.settle()
	if got := h.writes(); got != 1 {
		t.Fatalf("writes = %d, want 1", got)
	}
	if c := cond(h.pod("web"), "ready.probed.io/app"); c.Status != v1.ConditionTrue || c.Message != "final" {
		t.Errorf("ready.probed.io/app = %+v", c)
	}

	// Flapping while a write is in flight: one more write, of the last state.
	g := h.gateWrites()
	g.arm()
	h.w.Set(webKey, appReady(false, "first"))
	g.waitEntered()
	for i := 0; i < 20; i++ {
		h.w.Set(webKey, appReady(i%2 == 0, "flap"))
	}
	h.w.Set(webKey, appReady(true, "last"))
	g.release()
	h.settle()
	if got := h.writes(); got != 3 {
		t.Fatalf("writes = %d, want 3", got)
	}
	if c := cond(h.pod("web"), "ready.probed.io/app"); c.Status != v1.ConditionTrue || c.Message != "last" {
		t.Errorf("ready.probed.io/app = %+v", c)
	}

	// Flapping during a write that ends where the write went: no more write.
	g.arm()
	h.w.Set(webKey, appReady(false, "down"))
	g.waitEntered()
	h.w.Set(webKey, appReady(true, "up"))
	h.w.Set(webKey, appReady(false, "down again"))
	g.release()
	h.settle()
	if got := h.writes(); got != 4 {
		t.Fatalf("writes = %d, want 4", got)
	}
}

func TestWriterOwnsOnlyItsConditions(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	h.start()
	both := []string{"app", "db"}
	h.w.Set(webKey, readiness("", both, true, true))
	h.settle()
	p := h.pod("web")
	for _, typ := range []v1.PodConditionType{"ready.probed.io/app", "ready.probed.io/db", PodReadyCondition} {
		if c := cond(p, typ); c == nil || c.Status != v1.ConditionTrue {
			t.Errorf("%s = %+v", typ, c)
		}
	}

	// db's probe is removed from the annotation: its condition goes.
	h.w.Set(webKey, readiness("", []string{"app"}, true))
	h.settle()
	p = h.pod("web")
	if c := cond(p, "ready.probed.io/db"); c != nil {
		t.Errorf("stale condition kept: %+v", c)
	}
	if cond(p, "ready.probed.io/app") == nil || cond(p, PodReadyCondition) == nil {
		t.Errorf("wanted conditions missing: %v", summarize(p.Status.Conditions))
	}

	// No probed probe at all: every probed condition goes, others stay.
	h.w.Set(webKey, PodState{})
	h.settle()
	p = h.pod("web")
	if owned := OwnedConditions(p.Status.Conditions); len(owned) != 0 {
		t.Errorf("probed conditions left: %v", summarize(owned))
	}
	if cond(p, "example.com/other") == nil || cond(p, v1.PodReady) == nil {
		t.Errorf("others' conditions lost: %v", summarize(p.Status.Conditions))
	}
	if got := h.writes(); got != 3 {
		t.Errorf("writes = %d, want 3", got)
	}
}

func TestWriterLivenessOnlyPod(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	h.start()
	h.w.Set(webKey, Derive([]ContainerInput{{Name: "app"}}))
	h.settle()
	p := h.pod("web")
	if c := cond(p, PodReadyCondition); c == nil || c.Status != v1.ConditionTrue || c.Reason != ReasonNoGatingProbes {
		t.Errorf("probed.io/ready = %+v", c)
	}
	if owned := OwnedConditions(p.Status.Conditions); len(owned) != 1 {
		t.Errorf("owned conditions = %v", summarize(owned))
	}
}

func TestWriterRetriesWithBackoffAndLatestWins(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	at := h.failWrites(3, apierrors.NewServiceUnavailable("apiserver is down"))
	h.start()

	h.w.Set(webKey, appReady(false, "A"))
	due := h.retryAt(webKey.UID)
	if want := t0.Add(retryBaseDelay); !due.Equal(want) {
		t.Errorf("first retry at %v, want %v", due, want)
	}
	// A new state during backoff waits for the backoff, then wins.
	h.w.Set(webKey, appReady(true, "B"))
	if got := at.get(); got != 1 {
		t.Fatalf("attempts = %d, want 1", got)
	}

	h.expectRetries(webKey.UID, at, retryBaseDelay, 2*retryBaseDelay, 4*retryBaseDelay)
	h.settle()
	if c := cond(h.pod("web"), "ready.probed.io/app"); c == nil || c.Status != v1.ConditionTrue || c.Message != "B" {
		t.Errorf("ready.probed.io/app = %+v", c)
	}
	if got, want := h.count(OutcomeError), 3; got != want {
		t.Errorf("error count = %d, want %d", got, want)
	}
	if got := h.count(OutcomeSuccess); got != 1 {
		t.Errorf("success count = %d, want 1", got)
	}
	if n := h.w.limiter.NumRequeues(webKey.UID); n != 0 {
		t.Errorf("backoff not reset after success: %d", n)
	}
}

func TestWriterDropsPodOnNotFound(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	at := h.failWrites(100, apierrors.NewNotFound(v1.Resource("pods"), "web"))
	h.start()
	h.w.Set(webKey, appReady(true, ""))
	h.settle()
	h.clock.Step(time.Hour)
	h.settle()
	if got := at.get(); got != 1 {
		t.Errorf("attempts = %d, want 1", got)
	}
	if got := h.count(OutcomeNotFound); got != 1 {
		t.Errorf("not_found count = %d", got)
	}
	h.w.mu.Lock()
	_, known := h.w.pods[webKey.UID]
	h.w.mu.Unlock()
	if known {
		t.Error("pod not dropped")
	}
}

func TestWriterDropsPodGoneFromCache(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	h.cache.remove(webKey.UID)
	h.start()
	h.w.Set(webKey, appReady(true, ""))
	h.settle()
	if n := len(h.cs.Actions()); n != 0 {
		t.Errorf("API calls for a pod that is gone: %v", h.cs.Actions())
	}
}

func TestWriterConflictInConditionsModeRetries(t *testing.T) {
	// A uid precondition failure comes back as a Conflict: retried, then
	// dropped once the cache shows the pod gone.
	h := newHarness(t, Options{}, webPod())
	h.failWrites(1, apierrors.NewConflict(v1.Resource("pods"), "web", errors.New("uid mismatch")))
	h.start()
	h.w.Set(webKey, appReady(true, ""))
	due := h.retryAt(webKey.UID)
	if got := h.count(OutcomeConflict); got != 1 {
		t.Errorf("conflict count = %d", got)
	}
	h.cache.remove(webKey.UID)
	h.clock.Step(due.Sub(h.clock.Now()))
	h.settle()
	if got := h.writes(); got != 1 {
		t.Errorf("writes = %d, want 1", got)
	}
}

func TestWriterResyncRepairsDrift(t *testing.T) {
	h := newHarness(t, Options{Resync: time.Minute}, webPod())
	h.start()
	h.w.Set(webKey, appReady(true, "ok"))
	h.settle()

	// No drift: the heartbeat writes nothing.
	h.heartbeat()
	if got := h.writes(); got != 1 {
		t.Fatalf("writes after a quiet heartbeat = %d, want 1", got)
	}

	// Someone deletes probed's condition; the next heartbeat puts it back.
	p := h.pod("web")
	var kept []v1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type != "ready.probed.io/app" {
			kept = append(kept, c)
		}
	}
	p.Status.Conditions = kept
	if _, err := h.cs.CoreV1().Pods("ns").UpdateStatus(context.Background(), p, metav1.UpdateOptions{FieldManager: "intruder"}); err != nil {
		t.Fatal(err)
	}
	h.heartbeat()
	if got := h.writes(); got != 2 {
		t.Fatalf("writes after drift = %d, want 2", got)
	}
	p = h.pod("web")
	if c := cond(p, "ready.probed.io/app"); c == nil || c.Status != v1.ConditionTrue || c.Message != "ok" {
		t.Errorf("condition not repaired: %+v", c)
	}
	if !cond(p, PodReadyCondition).LastTransitionTime.Time.Equal(t0) {
		t.Errorf("repair moved an unchanged condition's lastTransitionTime")
	}
	if cond(p, "example.com/other") == nil {
		t.Error("others' condition lost")
	}

	// Drift of a pod that vanished from the cache drops it.
	h.cache.remove(webKey.UID)
	h.heartbeat()
	h.w.mu.Lock()
	_, known := h.w.pods[webKey.UID]
	h.w.mu.Unlock()
	if known {
		t.Error("pod gone from the cache was kept")
	}
}

func TestWriterLaggingCacheNeverDuplicates(t *testing.T) {
	h := newHarness(t, Options{Resync: time.Minute}, webPod())
	h.cache.freeze(webPod()) // the cache never sees probed's writes
	h.start()

	h.w.Set(webKey, appReady(true, "a"))
	h.settle()
	h.w.Set(webKey, appReady(true, "b")) // message only
	h.settle()
	h.clock.Step(30 * time.Second)
	h.w.Set(webKey, appReady(false, "c"))
	h.settle()
	h.w.Set(webKey, appReady(false, "d"))
	h.settle()
	if got := h.writes(); got != 2 {
		t.Fatalf("writes = %d, want 2", got)
	}
	// 30s after the last write, the stale cache is not taken for drift.
	h.heartbeatAfter(30 * time.Second)
	if got := h.writes(); got != 2 {
		t.Fatalf("writes after heartbeat = %d, want 2", got)
	}
	// A cache still stale a whole Resync after the write is taken for drift:
	// one idempotent rewrite per Resync, the documented price of a broken
	// watch.
	h.heartbeat()
	if got := h.writes(); got != 3 {
		t.Fatalf("writes after second heartbeat = %d, want 3", got)
	}
	// lastTransitionTime came from probed's own last write, not the cache.
	if c := cond(h.pod("web"), "ready.probed.io/app"); !c.LastTransitionTime.Time.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("lastTransitionTime = %v", c.LastTransitionTime)
	}
}

func TestWriterRestartDoesNotRewrite(t *testing.T) {
	first := newHarness(t, Options{}, webPod())
	first.start()
	first.w.Set(webKey, readiness("ok", []string{"app", "db"}, true, false))
	first.settle()
	first.stop()
	before := first.writes()

	// A new writer, as after a restart of probed, sees the same pod.
	second, err := NewWriter(Options{Client: fromclientset.New(first.cs), Pods: first.cache, Clock: first.clock, Metrics: NewMetrics(nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); second.Run(ctx) }()
	second.Set(webKey, readiness("new message", []string{"app", "db"}, true, false))
	first.waitFor("the new writer to settle", func() bool { return testutil.ToFloat64(second.opts.Metrics.pending) == 0 })
	cancel()
	<-done
	if got := first.writes(); got != before {
		t.Errorf("a restarted writer wrote %d times for an unchanged state", got-before)
	}
}

func TestWriterDryRun(t *testing.T) {
	for _, mode := range []Mode{ModeConditions, ModeContainerStatus} {
		t.Run(string(mode), func(t *testing.T) {
			h := newHarness(t, Options{Mode: mode, DryRun: true}, webPod())
			h.start()
			h.w.Set(webKey, appReady(false, "no"))
			h.settle()
			h.w.Set(webKey, appReady(false, "still no"))
			h.settle()
			h.heartbeat()
			for _, a := range h.cs.Actions() {
				t.Errorf("dry run called the API: %s %s", a.GetVerb(), a.GetSubresource())
			}
			if got := h.count(OutcomeDryRun); got != 1 {
				t.Errorf("dry_run count = %d, want 1", got)
			}
		})
	}
	if _, err := NewWriter(Options{Pods: &cache{}, DryRun: true}); err != nil {
		t.Errorf("dry run without a client: %v", err)
	}
}

func TestWriterFlushesOnShutdown(t *testing.T) {
	t.Run("pending before Run", func(t *testing.T) {
		h := newHarness(t, Options{}, webPod())
		h.w.Set(webKey, appReady(true, "flushed"))
		h.cancel()
		h.w.Run(h.ctx) // returns after the flush
		if got := h.writes(); got != 1 {
			t.Fatalf("writes = %d, want 1", got)
		}
		if c := cond(h.pod("web"), "ready.probed.io/app"); c == nil || c.Message != "flushed" {
			t.Errorf("ready.probed.io/app = %+v", c)
		}
	})
	t.Run("in backoff", func(t *testing.T) {
		h := newHarness(t, Options{}, webPod())
		at := h.failWrites(1, apierrors.NewInternalError(errors.New("boom")))
		h.start()
		h.w.Set(webKey, appReady(false, "A"))
		h.retryAt(webKey.UID)
		h.w.Set(webKey, appReady(true, "B"))
		h.stop()
		if got := at.get(); got != 2 {
			t.Fatalf("attempts = %d, want 2", got)
		}
		if c := cond(h.pod("web"), "ready.probed.io/app"); c == nil || c.Message != "B" {
			t.Errorf("ready.probed.io/app = %+v", c)
		}
	})
	t.Run("interrupted write", func(t *testing.T) {
		h := newHarness(t, Options{}, webPod())
		at := &attempts{}
		h.cs.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
			if at.inc() == 1 {
				h.cancel() // shutdown while the request is in flight
				return true, nil, context.Canceled
			}
			return false, nil, nil
		})
		h.start()
		h.w.Set(webKey, appReady(true, "C"))
		<-h.done
		if got := at.get(); got != 2 {
			t.Fatalf("attempts = %d, want 2", got)
		}
		if got := h.count(OutcomeError); got != 0 {
			t.Errorf("an interrupted write counted as an error")
		}
		if c := cond(h.pod("web"), "ready.probed.io/app"); c == nil || c.Message != "C" {
			t.Errorf("ready.probed.io/app = %+v", c)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		h := newHarness(t, Options{FlushTimeout: time.Nanosecond}, webPod())
		h.w.Set(webKey, appReady(true, ""))
		h.cancel()
		h.w.Run(h.ctx)
		if got := h.writes(); got != 0 {
			t.Errorf("writes after the flush deadline = %d", got)
		}
	})
}

func TestWriterForget(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	h.w.Set(webKey, appReady(true, ""))
	h.w.Forget(webKey.UID)
	if got := testutil.ToFloat64(h.metrics.pending); got != 0 {
		t.Errorf("pending = %v after Forget", got)
	}
	h.start()
	h.heartbeat()
	if got := h.writes(); got != 0 {
		t.Errorf("writes for a forgotten pod = %d", got)
	}
}

func TestWriterForgetDuringWrite(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	entered, release := make(chan struct{}), make(chan struct{})
	h.cs.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		close(entered)
		<-release
		return true, nil, apierrors.NewInternalError(errors.New("boom"))
	})
	h.start()
	h.w.Set(webKey, appReady(true, ""))
	<-entered
	h.w.Forget(webKey.UID)
	close(release)
	h.settle()
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if len(h.w.pods) != 0 || h.w.pending != 0 {
		t.Errorf("forgotten pod came back: %v %v", h.w.pods, h.w.pending)
	}
}

func TestRunTwice(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	h.start()
	h.waitFor("Run to start", func() bool { return h.clock.HasWaiters() })
	done := make(chan struct{})
	go func() { defer close(done); h.w.Run(h.ctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("second Run did not return")
	}
}

func TestNewWriterValidates(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	ok := Options{Client: fromclientset.New(h.cs), Pods: h.cache}
	w, err := NewWriter(ok)
	if err != nil {
		t.Fatal(err)
	}
	if w.opts.Mode != ModeConditions || w.opts.Resync != DefaultResync || w.opts.FlushTimeout != DefaultFlushTimeout || w.clock == nil {
		t.Errorf("defaults not applied: %+v", w.opts)
	}
	for name, mutate := range map[string]func(*Options){
		"no pods":           func(o *Options) { o.Pods = nil },
		"no client":         func(o *Options) { o.Client = nil },
		"bad mode":          func(o *Options) { o.Mode = "patch" },
		"negative resync":   func(o *Options) { o.Resync = -time.Second },
		"negative flush":    func(o *Options) { o.FlushTimeout = -time.Second },
		"several at a time": func(o *Options) { o.Pods, o.Mode = nil, "x" },
	} {
		o := ok
		mutate(&o)
		if _, err := NewWriter(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for in, want := range map[string]Mode{"conditions": ModeConditions, "container-status": ModeContainerStatus} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseMode("status"); err == nil || !strings.Contains(err.Error(), "container-status") {
		t.Errorf("ParseMode(bad) error = %v", err)
	}
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.write(OutcomeSuccess, 1)
	m.setPending(3)
	if m := NewMetrics(nil); testutil.ToFloat64(m.writes.WithLabelValues(OutcomeError)) != 0 {
		t.Error("fresh counter not zero")
	}
}

func TestMetricsRegistered(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	h.w.Set(webKey, appReady(true, ""))
	n, err := testutil.GatherAndCount(h.reg, "probed_status_writes_total", "probed_status_write_duration_seconds", "probed_status_pending_pods")
	if err != nil {
		t.Fatal(err)
	}
	// 5 outcomes, 1 histogram, 1 gauge.
	if n != 7 {
		t.Errorf("series = %d, want 7", n)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering twice did not panic")
		}
	}()
	NewMetrics(h.reg)
}

// A pod whose own write fails (not the API server as a whole) retries after
// a backoff that doubles each time, and not before; a success resets it.
func TestWriterPodBackoffIsExponential(t *testing.T) {
	h := newHarness(t, Options{}, webPod())
	at := h.failWrites(3, apierrors.NewForbidden(v1.Resource("pods"), "web", errors.New("denied by policy")))
	h.start()
	h.w.Set(webKey, appReady(true, "ok"))
	h.expectRetries(webKey.UID, at, retryBaseDelay, 2*retryBaseDelay, 4*retryBaseDelay)
	h.settle()
	if got := h.count(OutcomeError); got != 3 {
		t.Errorf("error count = %d, want 3", got)
	}
	if n := h.w.limiter.NumRequeues(webKey.UID); n != 0 {
		t.Errorf("backoff not reset after success: %d", n)
	}
	if h.outageActive() {
		t.Error("a per-pod error opened the writer-wide outage gate")
	}
}

// One loop writes one request at a time: while a write is in flight, the
// other pods wait in the queue, and go out after it, in order. (A second
// loop would take a pod out of the queue at once.)
func TestWriterOneRequestAtATime(t *testing.T) {
	const n = 10
	pods := numberedPods(n)
	h := newHarness(t, Options{}, pods...)
	g := h.gateWrites()
	h.start()
	g.arm()
	h.w.Set(keyOf(pods[0]), appReady(true, "ok"))
	g.waitEntered()
	for _, p := range pods[1:] {
		h.w.Set(keyOf(p), appReady(true, "ok"))
	}
	h.waitFor("the other pods queued behind the write", func() bool {
		h.w.mu.Lock()
		defer h.w.mu.Unlock()
		return h.w.queue.Len() == n-1
	})
	g.release()
	h.settle()
	var order []string
	for _, a := range h.cs.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			order = append(order, a.(clienttesting.PatchActionImpl).GetName())
		}
	}
	for i, p := range pods {
		if i >= len(order) || order[i] != p.Name {
			t.Fatalf("writes in order %v, want one per pod in the order of their Sets", order)
		}
	}
}
