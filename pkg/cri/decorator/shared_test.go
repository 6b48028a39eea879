package decorator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// gatedRuntime runs each exec until the test releases it with a result.
type gatedRuntime struct {
	started chan string // the command's first word, per exec
	release chan gatedResult
}

type gatedResult struct {
	out  string
	code int
	err  error
}

func newGatedRuntime() *gatedRuntime {
	return &gatedRuntime{started: make(chan string, 16), release: make(chan gatedResult)}
}

func (g *gatedRuntime) ExecInContainer(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	g.started <- id + ":" + cmd[0]
	select {
	case r := <-g.release:
		return []byte(r.out), r.code, r.err
	case <-ctx.Done():
		return nil, -1, ctx.Err()
	}
}
func (g *gatedRuntime) StopContainer(context.Context, string, time.Duration) error { return nil }
func (g *gatedRuntime) Ready(context.Context) error                                { return nil }
func (g *gatedRuntime) Close() error                                               { return nil }

type execResult struct {
	out  string
	code int
	err  error
}

// sharingFixture is a Limited that shares runs, on a fake clock.
type sharingFixture struct {
	t     *testing.T
	rt    *gatedRuntime
	l     *Limited
	clock *clocktesting.FakeClock
	reg   *prometheus.Registry
}

func newSharingFixture(t *testing.T) *sharingFixture {
	f := &sharingFixture{t: t, rt: newGatedRuntime(), clock: clocktesting.NewFakeClock(time.Unix(1000, 0)), reg: prometheus.NewRegistry()}
	f.l = NewLimited(f.rt, 8, NewMetrics(f.reg))
	f.l.ShareIdenticalExecs(f.clock)
	return f
}

// exec starts an exec and returns where its result arrives.
func (f *sharingFixture) exec(ctx context.Context, id string, cmd string, timeout time.Duration) <-chan execResult {
	ch := make(chan execResult, 1)
	go func() {
		out, code, err := f.l.ExecInContainer(ctx, id, []string{cmd, "-x"}, timeout)
		ch <- execResult{string(out), code, err}
	}()
	return ch
}

func (f *sharingFixture) started() string {
	f.t.Helper()
	select {
	case s := <-f.rt.started:
		return s
	case <-time.After(10 * time.Second):
		f.t.Fatal("no exec reached the runtime")
	}
	return ""
}

func (f *sharingFixture) noneStarted() {
	f.t.Helper()
	select {
	case s := <-f.rt.started:
		f.t.Fatalf("exec %s reached the runtime; want it shared", s)
	case <-time.After(50 * time.Millisecond):
	}
}

func (f *sharingFixture) result(ch <-chan execResult) execResult {
	f.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		f.t.Fatal("no result")
	}
	return execResult{}
}

// waitJoined waits until a joiner's timer exists on the fake clock.
func (f *sharingFixture) waitJoined() {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f.clock.HasWaiters() {
		if time.Now().After(deadline) {
			f.t.Fatal("the joiner never waited")
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *sharingFixture) shared() float64 {
	return testutil.ToFloat64(f.l.m.shared)
}

// Liveness and readiness with the same command in the same container: the
// second, arriving while the first runs, gets its result and no exec of its
// own.
func TestIdenticalExecsShareOneRun(t *testing.T) {
	f := newSharingFixture(t)
	ctx := context.Background()
	leader := f.exec(ctx, "c1", "check", 5*time.Second)
	f.started()
	f.clock.Step(time.Second)
	joiner := f.exec(ctx, "c1", "check", 3*time.Second)
	f.waitJoined()
	f.noneStarted()
	f.rt.release <- gatedResult{out: "fine", code: 0}
	for _, r := range []execResult{f.result(leader), f.result(joiner)} {
		if r.out != "fine" || r.code != 0 || r.err != nil {
			t.Errorf("result %+v, want the run's", r)
		}
	}
	if got := f.shared(); got != 1 {
		t.Errorf("probed_runtime_exec_shared_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.l.m.execTotal.WithLabelValues("unknown", OutcomeSuccess)); got != 1 {
		t.Errorf("execs in the runtime = %v, want 1", got)
	}

	// The run is over: the next exec runs again.
	next := f.exec(ctx, "c1", "check", 3*time.Second)
	f.started()
	f.rt.release <- gatedResult{out: "again", code: 1}
	if r := f.result(next); r.out != "again" || r.code != 1 {
		t.Errorf("after the run: %+v, want its own run", r)
	}
}

// A caller is never given a run that could time out before it would have:
// no sharing across containers or commands, nor with a run whose timeout is
// shorter, nor with one already older than the caller's timeout.
func TestExecsThatMustNotShare(t *testing.T) {
	f := newSharingFixture(t)
	ctx := context.Background()
	leader := f.exec(ctx, "c1", "check", 2*time.Second)
	f.started()

	others := []<-chan execResult{
		f.exec(ctx, "c2", "check", 2*time.Second), // another container
		f.exec(ctx, "c1", "other", 2*time.Second), // another command
		f.exec(ctx, "c1", "check", 5*time.Second), // a longer timeout than the run's
	}
	for range others {
		f.started()
	}
	// The newest run of c1/check is now the 5 s one, 2 s old: a 1 s caller
	// runs its own, a 5 s one joins.
	f.clock.Step(2 * time.Second)
	others = append(others, f.exec(ctx, "c1", "check", time.Second))
	f.started()
	joiner := f.exec(ctx, "c1", "check", 5*time.Second)
	f.waitJoined()
	f.noneStarted()
	for i := 0; i < 5; i++ {
		f.rt.release <- gatedResult{out: "x"}
	}
	for _, ch := range append(others, leader, joiner) {
		if r := f.result(ch); r.err != nil {
			t.Errorf("result %+v", r)
		}
	}
}

// The run took longer than a joiner's own timeout: the joiner times out at
// its own timeout, counted from the run's start, while the leader, with the
// longer timeout, gets the result.
func TestJoinerTimesOutAtItsOwnTimeout(t *testing.T) {
	f := newSharingFixture(t)
	ctx := context.Background()
	leader := f.exec(ctx, "c1", "check", 10*time.Second)
	f.started()
	joiner := f.exec(ctx, "c1", "check", 2*time.Second)
	f.waitJoined()
	f.clock.Step(2 * time.Second)
	r := f.result(joiner)
	var te *cri.TimeoutError
	if !errors.As(r.err, &te) || te.After != 2*time.Second || !cri.IsTimeout(r.err) {
		t.Fatalf("joiner: %+v, want a timeout after 2s", r)
	}
	f.rt.release <- gatedResult{out: "slow but fine"}
	if r := f.result(leader); r.out != "slow but fine" || r.err != nil {
		t.Errorf("leader: %+v", r)
	}
}

// A joiner whose timer has not fired yet but whose run finished after its
// timeout (the clock jumped) still gets a timeout: the verdict is the run's
// duration against the caller's timeout.
func TestRunLongerThanJoinersTimeoutIsItsTimeout(t *testing.T) {
	f := newSharingFixture(t)
	ctx := context.Background()
	leader := f.exec(ctx, "c1", "check", 10*time.Second)
	f.started()
	joiner := f.exec(ctx, "c1", "check", 2*time.Second)
	f.waitJoined()
	// The run ends "3 s" in; the joiner's timer has not been delivered.
	f.l.share.mu.Lock()
	for _, r := range f.l.share.runs {
		r.start = r.start.Add(-3 * time.Second)
	}
	f.l.share.mu.Unlock()
	f.rt.release <- gatedResult{out: "late"}
	if r := f.result(leader); r.out != "late" {
		t.Errorf("leader: %+v", r)
	}
	if r := f.result(joiner); !cri.IsTimeout(r.err) {
		t.Errorf("joiner: %+v, want a timeout (the run took 3 s, its timeout is 2 s)", r)
	}
}

// The leader's worker stops mid-run: its cancelled run is nobody's answer;
// the joiner runs the command itself.
func TestAbandonedRunIsRunAgain(t *testing.T) {
	f := newSharingFixture(t)
	lctx, cancel := context.WithCancel(context.Background())
	leader := f.exec(lctx, "c1", "check", 5*time.Second)
	f.started()
	joiner := f.exec(context.Background(), "c1", "check", 5*time.Second)
	f.waitJoined()
	cancel()
	if r := f.result(leader); !errors.Is(r.err, context.Canceled) {
		t.Errorf("leader: %+v, want its context's error", r)
	}
	f.started() // the joiner's own run
	f.rt.release <- gatedResult{out: "own"}
	if r := f.result(joiner); r.out != "own" || r.err != nil {
		t.Errorf("joiner: %+v, want its own run's result", r)
	}
	if got := f.shared(); got != 0 {
		t.Errorf("shared = %v, want 0", got)
	}
}

// Off (the default): every exec runs.
func TestSharingIsOptIn(t *testing.T) {
	rt := newGatedRuntime()
	l := NewLimited(rt, 4, NewMetrics(prometheus.NewRegistry()))
	ctx := context.Background()
	done := make(chan struct{}, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, _, _ = l.ExecInContainer(ctx, "c1", []string{"check"}, time.Second)
			done <- struct{}{}
		}()
	}
	for i := 0; i < 2; i++ {
		select {
		case <-rt.started:
		case <-time.After(10 * time.Second):
			t.Fatal("both execs should reach the runtime")
		}
	}
	rt.release <- gatedResult{}
	rt.release <- gatedResult{}
	<-done
	<-done
}

// ownedGatedRuntime is a gatedRuntime whose containers carry kubelet labels.
type ownedGatedRuntime struct {
	*gatedRuntime
	owners map[string]cri.RuntimeOwner
}

func (r ownedGatedRuntime) ContainerOwner(_ context.Context, id string) (cri.RuntimeOwner, error) {
	if o, ok := r.owners[id]; ok {
		return o, nil
	}
	return cri.RuntimeOwner{}, cri.ErrContainerNotFound
}

// A pod whose status names another pod's container ID must not get that
// container's output by joining its owner's identical run: the joiner is
// checked as an exec of its own would be, refused and counted.
func TestSharedRunIsOnlyForTheContainersOwner(t *testing.T) {
	gated := newGatedRuntime()
	rt := ownedGatedRuntime{gatedRuntime: gated, owners: map[string]cri.RuntimeOwner{
		victimID: kubeletLabels("kube-system", "etcd-node", "uid-victim", "etcd"),
	}}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	v, err := NewVerified(rt, m)
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakeClock(time.Unix(1000, 0))
	l := NewLimited(v, 8, m)
	l.ShareIdenticalExecs(clock)

	victim := cri.WithOwner(context.Background(), cri.Owner{PodNamespace: "kube-system", PodName: "etcd-node", PodUID: "uid-victim", Container: "etcd"})
	leader := make(chan execResult, 1)
	go func() {
		out, code, err := l.ExecInContainer(victim, victimID, []string{"cat", "/secret"}, 5*time.Second)
		leader <- execResult{string(out), code, err}
	}()
	select {
	case <-gated.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's exec never reached the runtime")
	}

	spoofed := make(chan execResult, 1)
	go func() {
		out, code, err := l.ExecInContainer(cri.WithOwner(context.Background(), attacker), victimID, []string{"cat", "/secret"}, 5*time.Second)
		spoofed <- execResult{string(out), code, err}
	}()
	// Refused at once, or waiting on the owner's run (a joiner's timer).
	var r execResult
	released := false
	deadline := time.Now().Add(10 * time.Second)
wait:
	for {
		select {
		case r = <-spoofed:
			break wait
		default:
		}
		if clock.HasWaiters() {
			gated.release <- gatedResult{out: "secret", code: 0}
			released = true
			r = <-spoofed
			t.Errorf("a spoofed container ID joined the owner's run and got %+v", r)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the spoofed exec neither returned nor joined")
		}
		time.Sleep(time.Millisecond)
	}
	var mismatch *cri.OwnerMismatchError
	if !errors.As(r.err, &mismatch) {
		t.Errorf("a spoofed container ID: %+v; want an *cri.OwnerMismatchError", r)
	}
	if !released {
		gated.release <- gatedResult{out: "secret", code: 0}
	}
	if r := <-leader; r.out != "secret" || r.err != nil {
		t.Errorf("the owner's own exec: %+v", r)
	}
	if got := testutil.ToFloat64(m.shared); got != 0 {
		t.Errorf("probed_runtime_exec_shared_total = %v, want 0", got)
	}
	if got := testutil.ToFloat64(m.refusals.WithLabelValues("exec")); got != 1 {
		t.Errorf("refusals{op=exec} = %v, want 1", got)
	}
}
