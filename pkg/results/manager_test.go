package results

import (
	"runtime"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCacheAndChangeOnlyUpdates(t *testing.T) {
	m := NewManager()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	if _, ok := m.Get("c1"); ok {
		t.Fatal("empty manager has a result")
	}
	m.Set("c1", Value{Result: Success}, pod)
	if v, ok := m.Get("c1"); !ok || v.Result != Success {
		t.Fatalf("Get = %v, %v; want Success", v, ok)
	}
	select {
	case <-m.Updates():
	default:
		t.Fatal("no signal after a change")
	}
	if got := m.Drain(); len(got) != 1 || got[0] != (Update{"c1", Success, "u1"}) {
		t.Fatalf("Drain = %+v", got)
	}
	m.Set("c1", Value{Result: Success}, pod)
	select {
	case <-m.Updates():
		t.Fatal("signal without a change")
	default:
	}
	if got := m.Drain(); got != nil {
		t.Fatalf("Drain without a change = %+v", got)
	}
}

func TestSlowConsumerSeesLatestPerContainer(t *testing.T) {
	m := NewManager()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
	// Far more changes than any channel buffer would hold; Set must never block.
	for i := 0; i < 10000; i++ {
		r := Success
		if i%2 == 1 {
			r = Failure
		}
		m.Set("a", Value{Result: r}, pod)
		m.Set("b", Value{Result: Unknown}, pod)
	}
	m.Set("b", Value{Result: Success}, pod)
	got := m.Drain()
	want := []Update{{"a", Failure, "u"}, {"b", Success, "u"}}
	if len(got) != len(want) {
		t.Fatalf("Drain = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Drain[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRemoveForgetsWithoutUpdate(t *testing.T) {
	m := NewManager()
	m.Set("a", Value{Result: Failure}, nil)
	m.Drain()
	m.Remove("a")
	if _, ok := m.Get("a"); ok {
		t.Fatal("removed result still cached")
	}
	if got := m.Drain(); got != nil {
		t.Fatalf("Remove queued %+v", got)
	}
	// A container seen again after Remove reports its first result anew.
	m.Set("a", Value{Result: Failure}, nil)
	if got := m.Drain(); len(got) != 1 {
		t.Fatalf("re-added container: Drain = %+v", got)
	}
}

func TestResultLabels(t *testing.T) {
	for r, want := range map[Result]string{Success: "successful", Failure: "failed", Unknown: "unknown"} {
		if got := r.MetricLabel(); got != want {
			t.Errorf("%v.MetricLabel() = %q, want %q", r, got, want)
		}
	}
}

// An unchanged result is the steady state of every worker: it must not
// allocate (contract with pkg/worker's zero-allocation tick).
func TestSetUnchangedAllocatesNothing(t *testing.T) {
	m := NewManager()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
	m.Set("c", Value{Result: Success, Output: "x", Probed: true}, pod)
	if n := testing.AllocsPerRun(100, func() { m.Set("c", Value{Result: Success}, pod) }); n != 0 {
		t.Fatalf("Set of an unchanged result: %v allocations, want 0", n)
	}
}

// A probe deciding the result the initial value already had (a readiness
// probe failing from its first run) is a change: it is what gives the
// condition its reason and message. A repeat keeps the first output.
func TestProbedResultIsAChangeAndKeepsItsOutput(t *testing.T) {
	m := NewManager()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
	m.Set("c", Value{Result: Failure}, pod) // the initial value
	m.Drain()
	m.Set("c", Value{Result: Failure, Output: "first", Probed: true}, pod)
	if got := m.Drain(); len(got) != 1 || got[0].Result != Failure {
		t.Fatalf("Drain after the first probed failure = %+v; want one update", got)
	}
	m.Set("c", Value{Result: Failure, Output: "second", Probed: true}, pod)
	if got := m.Drain(); got != nil {
		t.Fatalf("a repeated failure queued %+v", got)
	}
	if v, _ := m.Get("c"); v.Output != "first" {
		t.Errorf("output = %q; want the deciding probe's %q", v.Output, "first")
	}
	m.Set("c", Value{Result: Success, Probed: true}, pod)
	if v, _ := m.Get("c"); v.Output != "" || v.Result != Success {
		t.Errorf("after the flip: %+v; want Success with no failure text", v)
	}
}

// The liveness cache is written for every container instance of the node
// and read by nobody as updates: after 10,000 instances, each published,
// probed and removed as a worker does, it must hold nothing, and the heap
// must be back where it started. A reporting Manager that nobody drains
// keeps an update per instance (the leak this guards against).
func TestCacheHoldsNothingAfterManyInstances(t *testing.T) {
	const instances = 10000
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
	cycle := func(m Manager) {
		for i := range instances {
			id := "containerd://" + strconv.Itoa(i) + "-0123456789abcdef0123456789abcdef"
			m.Set(id, Value{Result: Success}, pod)
			m.Set(id, Value{Result: Failure, Output: "liveness failed", Probed: true}, pod)
			m.Remove(id)
		}
	}
	heapAfter := func(f func()) int64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.GC()
		runtime.ReadMemStats(&after)
		return int64(after.HeapAlloc) - int64(before.HeapAlloc)
	}
	c := NewCache()
	grew := heapAfter(func() { cycle(c) })
	if got := c.Drain(); got != nil {
		t.Errorf("cache Drain = %d updates; want none", len(got))
	}
	inner := c.(*manager)
	if len(inner.cache) != 0 || len(inner.pending) != 0 || len(inner.order) != 0 {
		t.Errorf("cache holds %d results, %d pending, %d queued; want none", len(inner.cache), len(inner.pending), len(inner.order))
	}
	undrained := NewManager()
	leaked := heapAfter(func() { cycle(undrained) })
	if n := len(undrained.(*manager).pending); n != instances {
		t.Errorf("undrained manager holds %d updates; want %d (the leak this test would miss)", n, instances)
	}
	t.Logf("heap growth over %d instances: cache %d B, undrained manager %d B", instances, grew, leaked)
	if grew > leaked/10 {
		t.Errorf("heap grew %d B with the cache, %d B with an undrained manager; want the cache's under a tenth", grew, leaked)
	}
	runtime.KeepAlive(c)
	runtime.KeepAlive(undrained)
}
