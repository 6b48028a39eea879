package kill

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/lifecycle"
	"github.com/probed-dev/probed/pkg/probespec"
)

// killLog is the order in which a kill's steps happened, shared by the
// recorder, the hook runner and the stopper below.
type killLog struct {
	mu    sync.Mutex
	steps []string
}

func (l *killLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, fmt.Sprintf(format, args...))
}

func (l *killLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.steps...)
}

type logRecorder struct{ log *killLog }

func (r logRecorder) Event(_ *v1.Pod, container, eventType, reason, message string) {
	r.log.add("event %s %s %s: %s", container, eventType, reason, message)
}

type logStopper struct{ log *killLog }

func (s logStopper) StopContainer(_ context.Context, id string, grace time.Duration) error {
	s.log.add("stop %s %v", id, grace)
	return nil
}

// gatedHooks is a HookRunner whose hook runs until the test releases it
// (returning err) or until its context ends.
type gatedHooks struct {
	log     *killLog
	started chan struct{}
	release chan error
}

func newGatedHooks(log *killLog) *gatedHooks {
	return &gatedHooks{log: log, started: make(chan struct{}, 1), release: make(chan error, 1)}
}

func (h *gatedHooks) Run(ctx context.Context, _ *v1.Pod, c *v1.Container, id string, _ *v1.LifecycleHandler) error {
	h.log.add("hook %s %s", c.Name, id)
	h.started <- struct{}{}
	select {
	case err := <-h.release:
		h.log.add("hook returned %v", err)
		return err
	case <-ctx.Done():
		h.log.add("hook cut short")
		return errors.New("cut short")
	}
}

func prestopPod(grace *int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: grace},
		Status:     v1.PodStatus{PodIP: "127.0.0.1", PodIPs: []v1.PodIP{{IP: "127.0.0.1"}}},
	}
}

func withPreStop(h v1.LifecycleHandler) *v1.Container {
	return &v1.Container{Name: "app", Lifecycle: &v1.Lifecycle{PreStop: &h}}
}

var drainHook = v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}

const (
	killingStep = "event app Normal Killing: Container app failed liveness probe, will be restarted"
	failedStep  = "event app Warning FailedPreStopHook: PreStopHook failed"
)

// killAsync runs k.Kill in a goroutine.
func killAsync(ctx context.Context, k *RuntimeKiller, pod *v1.Pod, c *v1.Container) <-chan error {
	done := make(chan error, 1)
	go func() { done <- k.Kill(ctx, pod, c, "containerd://abc", probespec.Liveness, nil) }()
	return done
}

func checkSteps(t *testing.T, log *killLog, want ...string) {
	t.Helper()
	if got := log.list(); !slices.Equal(got, want) {
		t.Errorf("steps:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestPreStopHookTiming walks a kill with a preStop hook through the fake
// clock: the event, then the hook, then the stop with the grace period
// less the whole seconds the hook took, never below 2 s.
func TestPreStopHookTiming(t *testing.T) {
	tests := []struct {
		name      string
		grace     int64
		hookTakes time.Duration
		wantStop  time.Duration
	}{
		{"hook at once: the whole grace", 12, 0, 12 * time.Second},
		{"3.5s are 3 whole seconds", 10, 3500 * time.Millisecond, 7 * time.Second},
		{"0.9s count for nothing", 10, 900 * time.Millisecond, 10 * time.Second},
		{"9.9s leave 1s, raised to 2s", 10, 9900 * time.Millisecond, MinimumGracePeriod},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log, clk := &killLog{}, newStepClock(epoch)
			hooks := newGatedHooks(log)
			k := &RuntimeKiller{Runtime: logStopper{log}, Hooks: hooks, Recorder: logRecorder{log}, Clock: clk}
			done := killAsync(context.Background(), k, prestopPod(i64(tc.grace)), withPreStop(drainHook))
			recv(t, hooks.started, "the hook")
			if d := recv(t, clk.armed, "the grace deadline"); d != time.Duration(tc.grace)*time.Second {
				t.Errorf("waits for the hook at most %v, want the grace period %ds", d, tc.grace)
			}
			clk.Step(tc.hookTakes)
			hooks.release <- nil
			if err := recv(t, done, "Kill"); err != nil {
				t.Fatalf("Kill = %v", err)
			}
			checkSteps(t, log, killingStep, "hook app containerd://abc", "hook returned <nil>",
				fmt.Sprintf("stop containerd://abc %v", tc.wantStop))
		})
	}
}

// TestPreStopHookOutlivesGrace: a hook still running at the end of the grace
// period does not hold the kill back: the container is stopped at the
// deadline with the 2 s minimum, then the hook ends (it is cut short, a
// FailedPreStopHook), all before Kill returns.
func TestPreStopHookOutlivesGrace(t *testing.T) {
	log, clk := &killLog{}, newStepClock(epoch)
	hooks := newGatedHooks(log)
	k := &RuntimeKiller{Runtime: logStopper{log}, Hooks: hooks, Recorder: logRecorder{log}, Clock: clk}
	done := killAsync(context.Background(), k, prestopPod(i64(5)), withPreStop(drainHook))
	recv(t, hooks.started, "the hook")
	recv(t, clk.armed, "the grace deadline")
	clk.Step(4999 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Kill returned before the deadline: %v", err)
	default:
	}
	clk.Step(time.Millisecond)
	if err := recv(t, done, "Kill"); err != nil {
		t.Fatalf("Kill = %v", err)
	}
	checkSteps(t, log, killingStep, "hook app containerd://abc", "stop containerd://abc 2s", "hook cut short", failedStep)
}

// TestPreStopHookSkipped: no hook without a grace period (the stop still
// gets 2 s), without a hook runner, or with --liveness-action=event-only.
func TestPreStopHookSkipped(t *testing.T) {
	deleting := prestopPod(i64(30))
	deleting.DeletionGracePeriodSeconds = i64(0)
	tests := []struct {
		name      string
		pod       *v1.Pod
		noHooks   bool
		eventOnly bool
		want      []string
	}{
		{"pod grace 0", prestopPod(i64(0)), false, false, []string{killingStep, "stop containerd://abc 2s"}},
		{"deletion grace 0", deleting, false, false, []string{killingStep, "stop containerd://abc 2s"}},
		{"no hook runner", prestopPod(i64(7)), true, false, []string{killingStep, "stop containerd://abc 7s"}},
		{"event only", prestopPod(i64(7)), false, true, []string{killingStep}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := &killLog{}
			k := &RuntimeKiller{Runtime: logStopper{log}, Recorder: logRecorder{log}, EventOnly: tc.eventOnly, Clock: newStepClock(epoch)}
			if !tc.noHooks {
				k.Hooks = newGatedHooks(log) // would block: it must not run
			}
			if err := k.Kill(context.Background(), tc.pod, withPreStop(drainHook), "containerd://abc", probespec.Liveness, nil); err != nil {
				t.Fatalf("Kill = %v", err)
			}
			checkSteps(t, log, tc.want...)
		})
	}
}

// TestMinimumGracePeriodWithoutHook: a grace period under 2 s is raised to 2 s.
func TestMinimumGracePeriodWithoutHook(t *testing.T) {
	log := &killLog{}
	k := &RuntimeKiller{Runtime: logStopper{log}, Recorder: logRecorder{log}}
	if err := k.Kill(context.Background(), prestopPod(i64(1)), &v1.Container{Name: "app"}, "containerd://abc", probespec.Liveness, nil); err != nil {
		t.Fatal(err)
	}
	checkSteps(t, log, killingStep, "stop containerd://abc 2s")
}

// TestPreStopKillAbandoned: when the kill's context ends during the hook,
// nothing is stopped and no hook failure is reported.
func TestPreStopKillAbandoned(t *testing.T) {
	log, clk := &killLog{}, newStepClock(epoch)
	hooks := newGatedHooks(log)
	k := &RuntimeKiller{Runtime: logStopper{log}, Hooks: hooks, Recorder: logRecorder{log}, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	done := killAsync(ctx, k, prestopPod(i64(30)), withPreStop(drainHook))
	recv(t, hooks.started, "the hook")
	cancel()
	if err := recv(t, done, "Kill"); !errors.Is(err, context.Canceled) {
		t.Errorf("Kill = %v, want the context's error", err)
	}
	checkSteps(t, log, killingStep, "hook app containerd://abc", "hook cut short")
}

// failingExec is a container runtime whose commands exit 1.
type failingExec struct{}

func (failingExec) ExecInContainer(context.Context, string, []string, time.Duration) ([]byte, int, error) {
	return []byte("cannot drain"), 1, nil
}

// TestPreStopHookFailures runs each hook type through the real
// lifecycle.Runner: a failure is a Warning FailedPreStopHook "PreStopHook
// failed", and the container is stopped all the same.
func TestPreStopHookFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close() // connection refused from now on

	tests := []struct {
		name  string
		hook  v1.LifecycleHandler
		step  time.Duration // fake time to pass once the kill waits
		steps []string
	}{
		{"exec exits 1", drainHook, 0,
			[]string{killingStep, failedStep, "stop containerd://abc 10s"}},
		{"httpGet refused", v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/drain", Port: intstr.FromInt32(int32(closedPort))}}, 0,
			[]string{killingStep, failedStep, "stop containerd://abc 10s"}},
		{"sleep outlives the grace", v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 60}}, 10 * time.Second,
			[]string{killingStep, "stop containerd://abc 2s", failedStep}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log, clk := &killLog{}, newStepClock(epoch)
			hooks := lifecycle.New(failingExec{}, lifecycle.Options{Clock: clk, HostGuard: hostpolicy.NewGuard(hostpolicy.DenyNodeLocal, hostpolicy.GuardOptions{})})
			k := &RuntimeKiller{Runtime: logStopper{log}, Hooks: hooks, Recorder: logRecorder{log}, Clock: clk}
			done := killAsync(context.Background(), k, prestopPod(i64(10)), withPreStop(tc.hook))
			if tc.step > 0 {
				recv(t, clk.armed, "a timer")
				recv(t, clk.armed, "a timer") // the grace deadline and the sleep
				clk.Step(tc.step)
			}
			if err := recv(t, done, "Kill"); err != nil {
				t.Fatalf("Kill = %v", err)
			}
			checkSteps(t, log, tc.steps...)
		})
	}
}

type panickingHooks struct{}

func (panickingHooks) Run(context.Context, *v1.Pod, *v1.Container, string, *v1.LifecycleHandler) error {
	panic("hook runner bug")
}

// TestPreStopHookPanics: a panicking hook runner is logged; the kill goes on.
func TestPreStopHookPanics(t *testing.T) {
	log := &killLog{}
	k := &RuntimeKiller{Runtime: logStopper{log}, Hooks: panickingHooks{}, Recorder: logRecorder{log}, Clock: newStepClock(epoch)}
	if err := k.Kill(context.Background(), prestopPod(i64(4)), withPreStop(drainHook), "containerd://abc", probespec.Liveness, nil); err != nil {
		t.Fatalf("Kill = %v", err)
	}
	checkSteps(t, log, killingStep, "stop containerd://abc 4s")
}
