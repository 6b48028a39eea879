package manager

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/probespec"
)

func (e *env) parityGauge(reason string) float64 {
	return testutil.ToFloat64(e.mgr.opts.Metrics.parity.WithLabelValues(reason))
}

// A sidecar's startup probe declared in the annotation is run, and said
// once: a Warning on the container and the gauge; a resync repeats
// nothing; the pod's going clears the gauge. A liveness or startup probe
// under restartPolicy OnFailure is not run (issue 31, 1b): an InvalidProbe
// names the reason and the fix, while the pod's readiness probe runs.
func TestParityWarnings(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	job := runningPod("job", "j1", annotate(map[string]map[string]any{"app": {"livenessProbe": tcp1, "startupProbe": tcp2, "readinessProbe": tcp1}}), "app")
	job.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	e.create(job)
	always := v1.ContainerRestartPolicyAlways
	mesh := runningPod("mesh", "m1", annotate(map[string]map[string]any{"proxy": {"startupProbe": tcp2, "livenessProbe": tcp1}, "app": {"livenessProbe": tcp1}}), "app")
	mesh.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "img", RestartPolicy: &always}}
	mesh.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "proxy", ContainerID: "containerd://m1-proxy", State: mesh.Status.ContainerStatuses[0].State}}
	e.create(mesh)
	plain := runningPod("plain", "p1", annotate(map[string]map[string]any{"app": {"livenessProbe": tcp1, "startupProbe": tcp2}}), "app")
	e.create(plain)

	e.eventually("the warning and the refusals", func() bool {
		return len(e.rec.byReason(ReasonSidecarStartupProbe)) == 1 && len(e.rec.byReason(ReasonInvalidProbe)) == 2
	})
	e.eventually("every pod synced", func() bool { return e.mgr.queue.Len() == 0 && e.mgr.WorkerCount() == 1+3+2 })
	for _, got := range e.rec.byReason(ReasonInvalidProbe) {
		if got.container != "app" || got.eventType != v1.EventTypeWarning ||
			!strings.Contains(got.message, "Forbidden: under restartPolicy OnFailure the kubelet restarts a container its") ||
			!strings.Contains(got.message, "in the pod spec, where the kubelet runs it") {
			t.Errorf("InvalidProbe event %+v", got)
		}
	}
	if sc := e.rec.byReason(ReasonSidecarStartupProbe)[0]; sc.container != "proxy" || !strings.Contains(sc.message, "starts the next init containers and the app containers") {
		t.Errorf("SidecarStartupProbe event %+v", sc)
	}
	if g := e.parityGauge("sidecar_startup_probe"); g != 1 {
		t.Errorf("gauge sidecar_startup_probe = %v, want 1", g)
	}

	// A resync says nothing again.
	job.Labels = map[string]string{"touched": "yes"}
	e.update(job)
	mesh.Labels = map[string]string{"touched": "yes"}
	e.update(mesh)
	e.eventually("updates processed", func() bool { return e.mgr.queue.Len() == 0 })
	if n, m := len(e.rec.byReason(ReasonInvalidProbe)), len(e.rec.byReason(ReasonSidecarStartupProbe)); n != 2 || m != 1 {
		t.Errorf("events repeated on resync: %d, %d", n, m)
	}

	// The mesh pod goes: its share of the gauge with it.
	mesh.Status.Phase = v1.PodSucceeded
	e.update(mesh)
	e.eventually("gauge back to 0", func() bool { return e.parityGauge("sidecar_startup_probe") == 0 })
}

// A startup probe the kubelet runs (it stayed in the pod spec) gates
// probed's liveness and readiness probes of the container through the
// kubelet's containerStatuses[].started, as the kubelet gates its own.
func TestKubeletStartupProbeGatesProbedProbes(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	const uid, id = "k1", "containerd://k1-app"
	pod := runningPod("p", uid, annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1, "livenessProbe": tcp1}}), "app")
	pod.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(9)}}}
	no := false
	pod.Status.ContainerStatuses[0].Started = &no
	e.create(pod)
	e.eventually("waiting for the kubelet's startup probe", func() bool {
		n := 0
		for _, s := range e.mgr.Snapshots() {
			if s.State == "waiting-for-startup" {
				n++
			}
		}
		return n == 2
	})
	e.prober.mu.Lock()
	calls := e.prober.calls[id+"/Readiness"] + e.prober.calls[id+"/Liveness"]
	e.prober.mu.Unlock()
	if calls != 0 {
		t.Fatalf("probed %d times before the kubelet's startup probe passed", calls)
	}
	if e.readyNow(uid)() {
		t.Fatal("ready before the kubelet's startup probe passed")
	}

	yes := true
	pod.Status.ContainerStatuses[0].Started = &yes
	e.update(pod)
	e.eventually("probed and ready once the kubelet says started", func() bool {
		e.prober.mu.Lock()
		defer e.prober.mu.Unlock()
		return e.prober.calls[id+"/Readiness"] > 0 && e.prober.calls[id+"/Liveness"] > 0 && e.readyNow(uid)()
	})
}

// A worker that ended because its container would not run again starts
// again when the container does run again after all (every container
// restarted for another's RestartAllContainers rule): the kubelet adds a
// pod's missing workers on every sync. Until then it stays ended.
func TestEndedWorkerStartsAgainForANewInstance(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	const uid = "r1"
	pod := runningPod("p", uid, annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app", "trigger")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Status.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	e.create(pod)
	ended := func() bool {
		e.mgr.mu.Lock()
		defer e.mgr.mu.Unlock()
		ent := e.mgr.pods[uidOf(uid)]
		return ent != nil && ent.workers[probeKey{"app", probespec.Readiness}] == nil && len(ent.ended) == 1
	}
	e.eventually("the worker ended on the terminated container", ended)
	pod.Labels = map[string]string{"sync": "1"}
	e.update(pod)
	e.eventually("the sync processed", func() bool { return e.mgr.queue.Len() == 0 })
	if !ended() {
		t.Fatal("a sync restarted the worker of a container that stays terminated")
	}

	pod.Status.ContainerStatuses[0].ContainerID = "containerd://r1-app-2"
	pod.Status.ContainerStatuses[0].State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}
	e.update(pod)
	e.eventually("the new instance probed and ready", func() bool {
		e.prober.mu.Lock()
		n := e.prober.calls["containerd://r1-app-2/Readiness"]
		e.prober.mu.Unlock()
		return n > 0 && e.readyNow(uid)()
	})
}
