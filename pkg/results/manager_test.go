package results

import (
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
	m.Set("c1", Success, pod)
	if r, ok := m.Get("c1"); !ok || r != Success {
		t.Fatalf("Get = %v, %v; want Success", r, ok)
	}
	select {
	case <-m.Updates():
	default:
		t.Fatal("no signal after a change")
	}
	if got := m.Drain(); len(got) != 1 || got[0] != (Update{"c1", Success, "u1"}) {
		t.Fatalf("Drain = %+v", got)
	}
	m.Set("c1", Success, pod)
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
		m.Set("a", r, pod)
		m.Set("b", Unknown, pod)
	}
	m.Set("b", Success, pod)
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
	m.Set("a", Failure, nil)
	m.Drain()
	m.Remove("a")
	if _, ok := m.Get("a"); ok {
		t.Fatal("removed result still cached")
	}
	if got := m.Drain(); got != nil {
		t.Fatalf("Remove queued %+v", got)
	}
	// A container seen again after Remove reports its first result anew.
	m.Set("a", Failure, nil)
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
	m.Set("c", Success, pod)
	if n := testing.AllocsPerRun(100, func() { m.Set("c", Success, pod) }); n != 0 {
		t.Fatalf("Set of an unchanged result: %v allocations, want 0", n)
	}
}
