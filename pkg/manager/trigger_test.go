package manager

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// slowReadiness has a 30 s period: without the kubelet's trigger a container
// that starts after the worker's first (skipped) probe waits up to 30 s for
// its first readiness probe. The test's 10 s deadline sits well inside that.
var slowReadiness = map[string]any{"tcpSocket": map[string]any{"port": 1}, "periodSeconds": 30}

func (e *env) readyNow(uid string) func() bool {
	return func() bool {
		st, ok := e.sink.get(uidOf(uid))
		return ok && len(st.Containers) == 1 && st.Containers[0].Ready
	}
}

// The kubelet's UpdatePodStatus: a container seen running whose readiness
// result is not Success gets its readiness probe at once, on start and on
// every restart, not at the worker's next tick.
func TestReadinessRunsAsSoonAsTheContainerRuns(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{"app": {"readinessProbe": slowReadiness}}), "app")
	// Created before its container runs: the worker's first probe finds
	// nothing to probe.
	pod.Status.ContainerStatuses[0].ContainerID = ""
	pod.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	e.create(pod)
	e.eventually("the worker's first step", func() bool {
		for _, s := range e.mgr.Snapshots() {
			if s.State == "container-not-running" {
				return true
			}
		}
		return false
	})
	calls := func() int {
		e.prober.mu.Lock()
		defer e.prober.mu.Unlock()
		n := 0
		for _, c := range e.prober.calls {
			n += c
		}
		return n
	}
	if n := calls(); n != 0 {
		t.Fatalf("probed %d times before the container ran", n)
	}

	pod.Status.ContainerStatuses[0].ContainerID = "containerd://u1-app"
	pod.Status.ContainerStatuses[0].State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}
	e.update(pod)
	e.eventually("ready on the first run", e.readyNow("u1"))

	// A restart: a new container ID, and readiness again at once.
	pod.Status.ContainerStatuses[0].ContainerID = "containerd://u1-app-1"
	pod.Status.ContainerStatuses[0].RestartCount = 1
	e.update(pod)
	e.eventually("not ready for the new instance, then ready at once", func() bool {
		e.prober.mu.Lock()
		n := e.prober.calls["containerd://u1-app-1/Readiness"]
		e.prober.mu.Unlock()
		return n > 0 && e.readyNow("u1")()
	})
}

// Started-ness is the kubelet's: by whether a startup worker exists. When
// the pod is being deleted the startup worker stops with Success, and the
// container counts as started, so its readiness probe runs.
func TestStartedDuringTerminationFollowsTheStartupWorker(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	neverStarts := map[string]any{"tcpSocket": map[string]any{"port": 1}, "periodSeconds": 1, "failureThreshold": 100}
	e.prober.mu.Lock()
	e.prober.result["containerd://u1-app"] = results.Failure // every probe fails
	e.prober.mu.Unlock()
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{
		"app": {"startupProbe": neverStarts, "readinessProbe": tcp1},
	}), "app")
	e.create(pod)
	readinessCalls := func() int {
		e.prober.mu.Lock()
		defer e.prober.mu.Unlock()
		return e.prober.calls["containerd://u1-app/Readiness"]
	}
	e.eventually("a failed startup probe", func() bool {
		e.prober.mu.Lock()
		defer e.prober.mu.Unlock()
		return e.prober.calls["containerd://u1-app/Startup"] > 0
	})
	if e.started(pod, &pod.Status.ContainerStatuses[0]) || readinessCalls() != 0 {
		t.Fatalf("started (%v) or readiness probed (%d times) while the startup probe fails",
			e.started(pod, &pod.Status.ContainerStatuses[0]), readinessCalls())
	}

	now := metav1.Now()
	pod.DeletionTimestamp = &now
	pod.DeletionGracePeriodSeconds = ptrTo(int64(30))
	e.update(pod)
	e.eventually("the startup worker ended", func() bool {
		e.mgr.mu.Lock()
		defer e.mgr.mu.Unlock()
		ent := e.mgr.pods["u1"]
		return ent != nil && ent.workers[probeKey{"app", probespec.Startup}] == nil
	})
	if !e.started(pod, &pod.Status.ContainerStatuses[0]) {
		t.Error("not started after the startup worker ended; the kubelet counts it started")
	}
	e.eventually("readiness probed during termination", func() bool { return readinessCalls() > 0 })
	e.eventually("the desired state says started", func() bool {
		st, ok := e.sink.get("u1")
		return ok && len(st.Containers) == 1 && st.Containers[0].Started && st.Containers[0].HasStartup
	})

	// It stays ended: a further sync of the terminating pod does not start
	// it again.
	if err := e.mgr.sync(context.Background(), "ns/p"); err != nil {
		t.Fatal(err)
	}
	e.mgr.mu.Lock()
	restarted := e.mgr.pods["u1"].workers[probeKey{"app", probespec.Startup}] != nil
	e.mgr.mu.Unlock()
	if restarted {
		t.Error("the ended startup worker was started again by a sync")
	}
}

func ptrTo[T any](v T) *T { return &v }

func uidOf(s string) types.UID { return types.UID(s) }

// started asks the pod's started rule, as its workers do.
func (e *env) started(pod *v1.Pod, cs *v1.ContainerStatus) bool {
	e.mgr.mu.Lock()
	ent := e.mgr.pods[pod.UID]
	e.mgr.mu.Unlock()
	if ent == nil {
		return true
	}
	return ent.started.Started(pod, cs)
}
