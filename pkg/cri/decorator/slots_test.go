package decorator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/internal/critest"

	"github.com/prometheus/client_golang/prometheus/testutil"
	testingclock "k8s.io/utils/clock/testing"
)

// hangRuntime runs "hang" until its context ends, and anything else at once.
type hangRuntime struct {
	mu      sync.Mutex
	running map[string]int // execs in the runtime, by container
	ran     map[string]int // execs done, by container
}

func newHangRuntime() *hangRuntime {
	return &hangRuntime{running: map[string]int{}, ran: map[string]int{}}
}

func (r *hangRuntime) ExecInContainer(ctx context.Context, id string, cmd []string, _ time.Duration) ([]byte, int, error) {
	r.mu.Lock()
	r.running[id]++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running[id]--
		r.ran[id]++
		r.mu.Unlock()
	}()
	if cmd[0] == "hang" {
		<-ctx.Done()
		return nil, -1, ctx.Err()
	}
	return []byte("ok"), 0, nil
}

func (r *hangRuntime) StopContainer(context.Context, string, time.Duration) error { return nil }
func (r *hangRuntime) Ready(context.Context) error                                { return nil }
func (r *hangRuntime) Close() error                                               { return nil }
func (r *hangRuntime) Name() string                                               { return "hang" }

func (r *hangRuntime) count(id string) (running, ran int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[id], r.ran[id]
}

func podCtx(ctx context.Context, pod string) context.Context {
	return cri.WithOwner(ctx, cri.Owner{PodNamespace: "ns", PodName: pod, PodUID: "uid-" + pod, Container: "app"})
}

// hangAll starts n hung execs of each pod and returns what ends them.
func hangAll(t *testing.T, l *Limited, n int, pods ...string) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, pod := range pods {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, _ = l.ExecInContainer(podCtx(ctx, pod), "containerd://"+pod, []string{"hang"}, 5*time.Minute)
			}()
		}
	}
	return func() { cancel(); wg.Wait() }
}

// victimExec runs the victim's exec probe (1 s timeout) and reports its
// error, or fails the test if it is still waiting after 10 s of real time
// (on the fake clock, nothing but a step could end its wait).
func victimExec(t *testing.T, l *Limited) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, _, err := l.ExecInContainer(podCtx(context.Background(), "victim"), "containerd://victim", []string{"true"}, time.Second)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the victim's exec is still waiting for a slot")
		return nil
	}
}

// Issue 20, item 3: one pod with ten hung exec probes keeps at most its
// share of the node's slots; another pod's exec liveness probe runs at
// every period without waiting for a slot.
func TestNoisyPodCannotStarveAnother(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	rt := newHangRuntime()
	m := NewMetrics(nil)
	l := NewLimitedWith(rt, LimitOptions{MaxConcurrent: 10, Clock: clk, Metrics: m})
	release := hangAll(t, l, 10, "noisy")
	defer release()
	critest.Eventually(t, "the noisy pod's share of slots taken", func() bool {
		running, _ := rt.count("containerd://noisy")
		return running == DefaultMaxConcurrentExecsPerPod
	})

	for period := range 6 {
		before := clk.Now()
		if err := victimExec(t, l); err != nil {
			t.Fatalf("period %d: the victim's exec: %v", period, err)
		}
		if !clk.Now().Equal(before) {
			t.Fatalf("period %d: the victim's exec needed the clock to move", period)
		}
		l.slots.mu.Lock()
		held := l.slots.pods["uid-noisy"].held
		l.slots.mu.Unlock()
		if held > DefaultMaxConcurrentExecsPerPod {
			t.Fatalf("period %d: the noisy pod holds %d slots, over its share of %d", period, held, DefaultMaxConcurrentExecsPerPod)
		}
		clk.Step(10 * time.Second) // the victim's period
	}
	if _, ran := rt.count("containerd://victim"); ran != 6 {
		t.Errorf("the victim's exec ran %d times in 6 periods", ran)
	}
	if got := testutil.ToFloat64(m.execTotal.WithLabelValues("hang", OutcomeQueueTimeout)); got != 0 {
		t.Errorf("%v execs timed out in the queue", got)
	}
}

// Ten pods with one hung exec each hold every slot: the oldest gives its
// slot up once it has held it for the hold limit, and the victim's exec
// runs within its timeout. The hung exec runs on.
func TestHungExecsYieldTheirSlots(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	rt := newHangRuntime()
	m := NewMetrics(nil)
	l := NewLimitedWith(rt, LimitOptions{MaxConcurrent: 10, MaxHold: 500 * time.Millisecond, Clock: clk, Metrics: m})
	var pods []string
	for i := range 10 {
		pods = append(pods, fmt.Sprintf("noisy-%d", i))
	}
	release := hangAll(t, l, 1, pods...)
	defer release()
	critest.Eventually(t, "every slot held by a hung exec", func() bool {
		l.slots.mu.Lock()
		defer l.slots.mu.Unlock()
		return l.slots.used == 10
	})

	done := make(chan error, 1)
	go func() {
		_, _, err := l.ExecInContainer(podCtx(context.Background(), "victim"), "containerd://victim", []string{"true"}, time.Second)
		done <- err
	}()
	critest.Eventually(t, "the victim waiting", func() bool {
		l.slots.mu.Lock()
		defer l.slots.mu.Unlock()
		return len(l.slots.turns) == 1
	})
	clk.Step(500 * time.Millisecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the victim's exec: %v", err)
		}
	case <-time.After(10 * time.Second):
		clk.Step(time.Second) // end the wait, so the goroutine ends
		t.Fatalf("the victim's exec still waiting after the hold limit: %v", <-done)
	}
	if got := testutil.ToFloat64(m.yields); got != 1 {
		t.Errorf("slot yields = %v, want 1 (the victim needed one slot)", got)
	}
	running := 0
	for _, p := range pods {
		n, _ := rt.count("containerd://" + p)
		running += n
	}
	if running != 10 {
		t.Errorf("%d hung execs still running, want all 10 (a yield does not end the exec)", running)
	}
}

// A freed slot goes to the waiting pods in turn, each pod's execs first
// come, first served.
func TestSlotsServePodsInTurn(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	s := newExecSlots(1, 1, 1, -1, clk, nil)
	first, ok := s.acquire(context.Background(), "a", 0)
	if !ok {
		t.Fatal("no slot for the first exec")
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	// Queue one at a time, so arrival order is known.
	arrivals := []struct{ pod, name string }{{"a", "a1"}, {"a", "a2"}, {"a", "a3"}, {"b", "b1"}, {"c", "c1"}}
	for i, a := range arrivals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, ok := s.acquire(context.Background(), a.pod, 0)
			if !ok {
				t.Errorf("%s: no slot", a.name)
				return
			}
			mu.Lock()
			order = append(order, a.name)
			mu.Unlock()
			h.release()
		}()
		critest.Eventually(t, a.name+" queued", func() bool { return waitingLen(s) == i+1 })
	}
	first.release()
	wg.Wait()
	want := []string{"a1", "b1", "c1", "a2", "a3"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("served %v, want %v", order, want)
	}
	if s.used != 0 || len(s.pods) != 0 || len(s.turns) != 0 {
		t.Errorf("left over: used %d, pods %v, turns %v", s.used, s.pods, s.turns)
	}
}

func waitingLen(s *execSlots) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.pods {
		n += len(p.waiting)
	}
	return n
}

// A waiter whose wait runs out, or whose context ends, leaves no trace: the
// next release is not handed to it, and the books balance.
func TestSlotWaitersLeave(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	s := newExecSlots(1, 1, 1, -1, clk, nil)
	h, _ := s.acquire(context.Background(), "a", 0)

	timedOut := make(chan bool, 1)
	go func() { _, ok := s.acquire(context.Background(), "b", time.Second); timedOut <- ok }()
	critest.Eventually(t, "b waiting", func() bool { return waitingLen(s) == 1 })
	clk.Step(time.Second)
	if ok := <-timedOut; ok {
		t.Fatal("b got a slot after its wait ran out")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan bool, 1)
	go func() { _, ok := s.acquire(ctx, "c", 0); cancelled <- ok }()
	critest.Eventually(t, "c waiting", func() bool { return waitingLen(s) == 1 })
	cancel()
	if ok := <-cancelled; ok {
		t.Fatal("c got a slot after its context ended")
	}
	h.release()
	h.release() // twice is once
	if s.used != 0 || len(s.pods) != 0 || len(s.turns) != 0 {
		t.Fatalf("left over: used %d, pods %v, turns %v", s.used, s.pods, s.turns)
	}
	h2, ok := s.acquire(context.Background(), "d", 0)
	if !ok {
		t.Fatal("no slot after all left")
	}
	h2.release()
	if _, ok := s.acquire(context.Background(), "e", 0); !ok {
		t.Fatal(errors.New("no slot after release"))
	}
}

// Issue 30, item 2: a pod's hung execs give their slots up after the hold
// limit, but a yield never lets the pod start more than
// ExecsInFlightPerShare times its share. Before the cap, each yield let one
// more of the pod's ten execs start, until all ten ran at once.
func TestYieldsDoNotLiftAPodsCapInFlight(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	rt := newHangRuntime()
	m := NewMetrics(nil)
	l := NewLimitedWith(rt, LimitOptions{MaxConcurrent: 10, MaxHold: 500 * time.Millisecond, Clock: clk, Metrics: m})
	release := hangAll(t, l, 10, "noisy")
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	const limit = ExecsInFlightPerShare * DefaultMaxConcurrentExecsPerPod
	running := func() int { n, _ := rt.count("containerd://noisy"); return n }
	// Every exec queued before the clock moves: a waiter that arrives after
	// the steps would find its holders long due and yield at once, and the
	// steps would check nothing (a loaded machine saw 2 of 4 run at the end).
	critest.Eventually(t, "the noisy pod's share of slots taken and the rest queued", func() bool {
		l.slots.mu.Lock()
		defer l.slots.mu.Unlock()
		p := l.slots.pods["uid-noisy"]
		return running() == DefaultMaxConcurrentExecsPerPod && p != nil && p.inFlight()+len(p.waiting) == 10
	})

	// Each step is one hold limit: the oldest holder yields to the pod's
	// next exec while the pod is under its cap.
	for step := range 10 {
		clk.Step(500 * time.Millisecond)
		critest.Eventually(t, fmt.Sprintf("step %d settled", step), func() bool {
			l.slots.mu.Lock()
			defer l.slots.mu.Unlock()
			return running() == l.slots.pods["uid-noisy"].inFlight() && !yieldDueLocked(l.slots)
		})
		if n := running(); n > limit {
			t.Fatalf("step %d: %d of the pod's execs run at once, over its cap of %d (%d × its share)", step, n, limit, ExecsInFlightPerShare)
		}
	}
	if n := running(); n != limit {
		t.Errorf("%d of the pod's execs run; want its cap, %d", n, limit)
	}
	if got := testutil.ToFloat64(m.yields); got != limit-DefaultMaxConcurrentExecsPerPod {
		t.Errorf("slot yields = %v, want %d (one per exec the cap lets in)", got, limit-DefaultMaxConcurrentExecsPerPod)
	}
	// Another pod still gets a slot at once: the yielded execs hold none.
	if err := victimExec(t, l); err != nil {
		t.Fatalf("the victim's exec: %v", err)
	}
	// The ended execs, yielded or not, leave nothing on the books.
	release()
	released = true
	l.slots.mu.Lock()
	defer l.slots.mu.Unlock()
	if l.slots.used != 0 || len(l.slots.pods) != 0 || len(l.slots.turns) != 0 || len(l.slots.holders) != 0 {
		t.Errorf("left over: used %d, pods %v, turns %v, holders %d", l.slots.used, l.slots.pods, l.slots.turns, len(l.slots.holders))
	}
}

// yieldDueLocked reports whether a holder is due to yield now: the slots'
// timer has fired and its goroutine has yet to act.
func yieldDueLocked(s *execSlots) bool {
	now := s.clock.Now()
	for _, h := range s.holders {
		if !h.since.Add(s.maxHold).After(now) && s.helpsLocked(h) {
			return true
		}
	}
	return false
}
