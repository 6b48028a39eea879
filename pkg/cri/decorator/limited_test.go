package decorator

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/internal/critest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeRuntime sleeps for delay (or until its timeout) and records concurrency.
type fakeRuntime struct {
	delay               time.Duration
	inFlight, maxFlight atomic.Int32
	mu                  sync.Mutex
	timeouts            []time.Duration
	stops               int
}

func (f *fakeRuntime) Name() string { return "fake" }

func (f *fakeRuntime) ExecInContainer(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxFlight.Load()
		if n <= m || f.maxFlight.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	f.timeouts = append(f.timeouts, timeout)
	f.mu.Unlock()
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return nil, -1, ctx.Err()
	}
	if timeout > 0 && f.delay > timeout {
		return nil, -1, &cri.TimeoutError{ContainerID: id, After: timeout}
	}
	if len(cmd) > 0 && cmd[0] == "false" {
		return []byte("no"), 1, nil
	}
	return []byte("ok"), 0, nil
}

func (f *fakeRuntime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops++
	if id == "bad" {
		return errors.New("boom")
	}
	return nil
}
func (f *fakeRuntime) Ready(context.Context) error { return nil }
func (f *fakeRuntime) Close() error                { return nil }

func TestLimitedCapsConcurrencyAndLosesNothing(t *testing.T) {
	f := &fakeRuntime{delay: 20 * time.Millisecond}
	reg := prometheus.NewRegistry()
	l := NewLimitedWith(f, LimitOptions{MaxConcurrent: 3, PerPod: 3, Metrics: NewMetrics(reg)})
	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, code, err := l.ExecInContainer(context.Background(), "c", []string{"true"}, 0); err == nil && code == 0 {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := f.maxFlight.Load(); got != 3 {
		t.Errorf("max in flight = %d, want 3", got)
	}
	if ok.Load() != 30 {
		t.Errorf("%d of 30 execs succeeded", ok.Load())
	}
	if got := testutil.ToFloat64(l.m.execTotal.WithLabelValues("fake", OutcomeSuccess)); got != 30 {
		t.Errorf("exec_total{success} = %v", got)
	}
	if got := testutil.ToFloat64(l.m.inFlight); got != 0 {
		t.Errorf("in_flight = %v after all done", got)
	}
	if n := testutil.CollectAndCount(reg, "probed_runtime_exec_queue_wait_seconds"); n != 1 {
		t.Errorf("queue wait histogram missing")
	}
}

// The wait for a slot is probed's, not the command's: once it runs, the
// command gets its whole timeout, as under the kubelet, which has no queue.
func TestLimitedRunsWithTheWholeTimeoutAfterQueueing(t *testing.T) {
	f := &fakeRuntime{delay: 300 * time.Millisecond}
	l := NewLimited(f, 1, NewMetrics(nil))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = l.ExecInContainer(context.Background(), "c", []string{"true"}, 0)
	}()
	critest.Eventually(t, "the condition", func() bool { return f.inFlight.Load() == 1 })

	// Queued ~300ms behind the first exec, with a 1s timeout: the exec
	// still gets the whole second.
	_, _, err := l.ExecInContainer(context.Background(), "c", []string{"true"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	f.mu.Lock()
	got := f.timeouts[1]
	f.mu.Unlock()
	if got != time.Second {
		t.Errorf("runtime got timeout %v, want the probe's whole 1s", got)
	}
}

func TestLimitedTimesOutInQueue(t *testing.T) {
	f := &fakeRuntime{delay: time.Second}
	l := NewLimited(f, 1, NewMetrics(nil))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = l.ExecInContainer(context.Background(), "c", []string{"true"}, 0)
	}()
	critest.Eventually(t, "the condition", func() bool { return f.inFlight.Load() == 1 })

	_, _, err := l.ExecInContainer(context.Background(), "containerd://x", []string{"true"}, 100*time.Millisecond)
	// Not a timeout: the prober would make that the container's Failure.
	var se *cri.SlotTimeoutError
	if !errors.As(err, &se) || cri.IsTimeout(err) || se.Waited != 100*time.Millisecond {
		t.Fatalf("want a slot timeout that is not a Timeout(), got %#v", err)
	}
	if th, ok := err.(interface{ Throttled() bool }); !ok || !th.Throttled() {
		t.Errorf("%v does not say Throttled()", err)
	}
	if got := testutil.ToFloat64(l.m.execTotal.WithLabelValues("fake", OutcomeQueueTimeout)); got != 1 {
		t.Errorf("exec_total{queue_timeout} = %v", got)
	}
	if got := testutil.ToFloat64(l.m.execTotal.WithLabelValues("fake", OutcomeTimeout)); got != 0 {
		t.Errorf("exec_total{timeout} = %v, want 0", got)
	}
	f.mu.Lock()
	ran := len(f.timeouts)
	f.mu.Unlock()
	if ran != 1 {
		t.Errorf("the runtime saw %d execs, want only the first", ran)
	}
	<-done
}

func TestLimitedQueueHonoursContext(t *testing.T) {
	f := &fakeRuntime{delay: time.Second}
	l := NewLimited(f, 1, nil) // nil metrics must be fine
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = l.ExecInContainer(context.Background(), "c", []string{"true"}, 0)
	}()
	critest.Eventually(t, "the condition", func() bool { return f.inFlight.Load() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := l.ExecInContainer(ctx, "c", []string{"true"}, 10*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want ctx's error, got %v", err)
	}
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("waited %v past ctx", d)
	}
	<-done
}

func TestLimitedOutcomesAndStops(t *testing.T) {
	f := &fakeRuntime{delay: time.Millisecond}
	reg := prometheus.NewRegistry()
	l := NewLimited(f, 0, NewMetrics(reg))
	if l.slots.total != DefaultMaxConcurrentExecs || l.slots.perPod != DefaultMaxConcurrentExecsPerPod || l.slots.maxHold != DefaultExecSlotMaxHold {
		t.Errorf("default slots = %d, per pod %d, hold %v", l.slots.total, l.slots.perPod, l.slots.maxHold)
	}
	ctx := context.Background()
	if _, code, _ := l.ExecInContainer(ctx, "c", []string{"false"}, time.Second); code != 1 {
		t.Errorf("code = %d", code)
	}
	f.delay = 50 * time.Millisecond
	_, _, err := l.ExecInContainer(ctx, "c", []string{"true"}, 10*time.Millisecond)
	var te *cri.TimeoutError
	if !errors.As(err, &te) || te.After != 10*time.Millisecond {
		t.Errorf("want a runtime timeout reporting the probe's timeout, got %#v", err)
	}
	_ = l.StopContainer(ctx, "good", time.Second)
	_ = l.StopContainer(ctx, "bad", time.Second)
	for _, c := range []struct {
		m    *prometheus.CounterVec
		lv   []string
		want float64
	}{
		{l.m.execTotal, []string{"fake", OutcomeNonzeroExit}, 1},
		{l.m.execTotal, []string{"fake", OutcomeTimeout}, 1},
		{l.m.stopsTotal, []string{"fake", OutcomeSuccess}, 1},
		{l.m.stopsTotal, []string{"fake", OutcomeError}, 1},
	} {
		if got := testutil.ToFloat64(c.m.WithLabelValues(c.lv...)); got != c.want {
			t.Errorf("%v = %v, want %v", c.lv, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(reg, "probed_runtime_stop_duration_seconds"); n != 1 {
		t.Error("stop duration missing")
	}
	if cri.RuntimeName(l) != "fake" {
		t.Errorf("name = %q", cri.RuntimeName(l))
	}
}

func TestExecOutcome(t *testing.T) {
	for _, c := range []struct {
		code int
		err  error
		want string
	}{
		{0, nil, OutcomeSuccess},
		{127, nil, OutcomeNonzeroExit},
		{-1, &cri.TimeoutError{}, OutcomeTimeout},
		{-1, context.DeadlineExceeded, OutcomeTimeout},
		{-1, cri.ErrContainerNotFound, OutcomeError},
	} {
		if got := execOutcome(c.code, c.err); got != c.want {
			t.Errorf("execOutcome(%d, %v) = %s, want %s", c.code, c.err, got, c.want)
		}
	}
}
