package status

import (
	"errors"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestAPIUnavailableClassification(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), true},
		{apierrors.NewServiceUnavailable("down"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewInternalError(errors.New("boom")), true},
		{apierrors.NewTimeoutError("slow", 1), true},
		{apierrors.NewForbidden(gr, "p", errors.New("policy")), false},
		{apierrors.NewConflict(gr, "p", errors.New("rv")), false},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil), false},
		{nil, false},
	} {
		if got := apiUnavailable(c.err); got != c.want {
			t.Errorf("apiUnavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// During an outage the writer sends one probe request per backoff step, not
// one per pod; the first success writes every pending pod at once.
func TestOutageProbesWithOnePodThenReleasesAll(t *testing.T) {
	const n = 20
	var pods []*v1.Pod
	var keys []PodKey
	for i := 0; i < n; i++ {
		p := webPod()
		p.Name = fmt.Sprintf("web-%d", i)
		p.UID = types.UID(fmt.Sprintf("uid-%d", i))
		pods = append(pods, p)
		keys = append(keys, PodKey{Namespace: p.Namespace, Name: p.Name, UID: p.UID})
	}
	h := newHarness(t, Options{}, pods...)
	at := h.failWrites(4, apierrors.NewServiceUnavailable("apiserver is down"))
	h.start()
	for _, k := range keys {
		h.w.Set(k, appReady(true, "ok"))
	}
	// Four failed probes, each after the writer-wide backoff.
	for i := 1; i <= 4; i++ {
		h.waitFor("a probe request", func() bool { return at.get() == i })
		var next time.Time
		h.waitFor("the outage backoff", func() bool {
			h.w.mu.Lock()
			defer h.w.mu.Unlock()
			next = h.w.outage.notBefore
			return h.w.outage.failures == i && h.armed()
		})
		if got := at.get(); got != i {
			t.Fatalf("%d requests during the outage after %d backoffs; want one per backoff", got, i)
		}
		h.clock.SetTime(next)
	}
	h.waitFor("every pod written after recovery", func() bool {
		for _, p := range pods {
			if c := cond(h.pod(p.Name), ReadyConditionType("app")); c == nil || c.Status != v1.ConditionTrue {
				return false
			}
		}
		return true
	})
	if got := at.get(); got != 4+n {
		t.Errorf("status writes = %d, want %d (4 failed probes + one per pod)", got, 4+n)
	}
	h.w.mu.Lock()
	active := h.w.outage.active()
	h.w.mu.Unlock()
	if active {
		t.Error("outage gate still active after a success")
	}
}

// A per-pod error (forbidden by an admission policy) backs off that pod
// alone; the others are written.
func TestPodErrorBacksOffThatPodAlone(t *testing.T) {
	other := webPod()
	other.Name, other.UID = "other", "uid-other"
	otherKey := PodKey{Namespace: other.Namespace, Name: other.Name, UID: other.UID}
	h := newHarness(t, Options{}, webPod(), other)
	h.failWrites(1, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web", errors.New("denied")))
	h.start()
	h.w.Set(webKey, appReady(true, "ok"))
	h.retryAt(webKey.UID)
	h.w.Set(otherKey, appReady(true, "ok"))
	h.waitFor("other pod written", func() bool {
		c := cond(h.pod("other"), ReadyConditionType("app"))
		return c != nil && c.Status == v1.ConditionTrue
	})
	h.w.mu.Lock()
	active := h.w.outage.active()
	h.w.mu.Unlock()
	if active {
		t.Error("a per-pod error opened the writer-wide outage gate")
	}
}

// The pod that probes the API server during an outage can go (forgotten, or
// gone from the cache) before its turn: another held pod probes in its
// place, so the held pods are written once the API server answers.
func TestOutageProbeHandedOnWhenTheProbePodGoes(t *testing.T) {
	for name, gone := range map[string]func(h *harness){
		"forgotten":           func(h *harness) { h.w.Forget(webKey.UID) },
		"gone from the cache": func(h *harness) { h.cache.remove(webKey.UID) },
	} {
		t.Run(name, func(t *testing.T) {
			others := numberedPods(2)
			h := newHarness(t, Options{}, append(others, webPod())...)
			at := h.failWrites(1, apierrors.NewServiceUnavailable("apiserver is down"))
			h.start()
			h.w.Set(webKey, appReady(true, "ok"))
			due := h.retryAt(webKey.UID) // web probes the API server at due
			for _, p := range others {
				h.w.Set(keyOf(p), appReady(true, "ok"))
			}
			h.waitFor("the other pods held", func() bool {
				h.w.mu.Lock()
				defer h.w.mu.Unlock()
				return len(h.w.outage.held) == len(others)
			})
			gone(h)
			h.clock.SetTime(due)
			h.waitFor("the held pods written", func() bool { return h.allReady(others) })
			if got := at.get(); got != 1+len(others) {
				t.Errorf("status writes = %d, want %d (the failed probe, then one per held pod)", got, 1+len(others))
			}
		})
	}
}
