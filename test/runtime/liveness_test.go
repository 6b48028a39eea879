//go:build runtime

package runtimetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/worker"
	ctrd "github.com/probed-dev/probed/test/harness/containerd"
)

// podSource plays the kubelet's pod status for one container.
type podSource struct {
	mu  sync.Mutex
	pod *v1.Pod
}

func (p *podSource) Pod(types.UID) (*v1.Pod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pod.DeepCopy(), true
}

func (p *podSource) run(containerID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pod.Status.ContainerStatuses = []v1.ContainerStatus{{
		Name: "app", ContainerID: containerID,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Minute))}},
	}}
}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Event(_ *v1.Pod, c, typ, reason, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, typ+" "+reason+" "+c+": "+msg)
}

func (l *eventLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}

func poll(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// startLivenessWorker runs probe as the liveness probe of container "app"
// (runtime ID id) of a running pod named name, in a real worker with the
// real RuntimeKiller, as probed wires it. stop ends the worker and waits.
func startLivenessWorker(rt cri.Runtime, name, id string, probe *v1.Probe) (w *worker.Worker, pods *podSource, events *eventLog, stop func()) {
	grace := int64(5)
	uid := types.UID("uid-" + name)
	pods = &podSource{pod: &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "app"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "127.0.0.1"},
	}}
	pods.run(id)
	events = &eventLog{}
	w = worker.New(worker.Config{
		PodUID: uid, PodNamespace: "ns", PodName: name,
		Container: &v1.Container{Name: "app"}, ProbeType: probespec.Liveness, Spec: probe,
		Prober:   prober.New(rt, prober.Options{}),
		Pods:     pods,
		Results:  results.NewManager(),
		Recorder: events,
		Killer:   &kill.RuntimeKiller{Runtime: rt, Recorder: events},
		Started:  func(*v1.Pod, *v1.ContainerStatus) bool { return true },
		// Long ago: no start-up jitter.
		DaemonStart: time.Now().Add(-time.Hour),
	})
	ctx, cancel := context.WithCancel(context.Background())
	go w.Run(ctx)
	return w, pods, events, func() { cancel(); <-w.Done() }
}

// The liveness decision path with the real runtime: at the failure threshold
// a Killing event and a really stopped container, then on hold with no
// probes, then a new container ID (the kubelet's restart) resumes probing.
func TestLivenessKillOnHoldAndResume(t *testing.T) {
	forEachImpl(t, func(t *testing.T, rt cri.Runtime) {
		h := need(t)
		spec := ctrd.ContainerSpec{Name: "app", Command: []string{"sh", "-c", `touch /tmp/healthy; trap "exit 0" TERM; sleep 100000 & wait`}}
		first := newContainer(t, spec)
		w, pods, events, stop := startLivenessWorker(rt, "live", first.RuntimeID(), &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 2,
		})
		defer stop()
		ctx := context.Background()

		succeeded := func(id string) func() bool {
			return func() bool {
				s := w.Snapshot()
				return s.ContainerID == id && len(s.History) > 0 && s.History[len(s.History)-1].Result == "success"
			}
		}
		poll(t, "a passing liveness probe", 10*time.Second, succeeded(first.RuntimeID()))
		if out, code, err := h.Exec(ctx, first.ID, "rm", "/tmp/healthy"); err != nil || code != 0 {
			t.Fatalf("rm: %q %d %v", out, code, err)
		}
		poll(t, "the Killing event", 15*time.Second, func() bool {
			return events.has("Normal Killing app: Container app failed liveness probe, will be restarted")
		})
		if !events.has("Warning Unhealthy app: Liveness probe failed: cat: can't open '/tmp/healthy'") {
			t.Errorf("no Unhealthy event with the exec output; events: %v", events.events)
		}
		poll(t, "the container stopped by the runtime", 15*time.Second, func() bool {
			st, err := h.ContainerState(ctx, first.ID)
			return err == nil && st == runtimeapi.ContainerState_CONTAINER_EXITED
		})
		// The snapshot is published when the tick ends, after the stop call
		// returns, which can be a moment after the runtime reports the exit.
		poll(t, "the worker on hold after the kill", 5*time.Second, func() bool {
			return w.Snapshot().State == worker.StateOnHold
		})
		n := len(w.Snapshot().History)
		time.Sleep(2500 * time.Millisecond) // periods pass; an on-hold worker must not probe
		if got := len(w.Snapshot().History); got != n {
			t.Fatalf("on-hold worker probed %d times", got-n)
		}

		// The kubelet restarts the container: a new ID, and probing resumes.
		second := newContainer(t, spec)
		pods.run(second.RuntimeID())
		poll(t, "probing resumed on the new container", 10*time.Second, succeeded(second.RuntimeID()))
		if s := w.Snapshot(); s.State != worker.StateRunning {
			t.Errorf("state after the new container = %q, want running", s.State)
		}
	})
}
