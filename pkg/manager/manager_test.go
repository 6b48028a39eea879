package manager

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/probed-dev/probed/internal/informertest"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/status"
)

// fakeProber answers every probe with the result set for its container.
type fakeProber struct {
	mu     sync.Mutex
	result map[string]results.Result
	calls  map[string]int
	// hold blocks a tcpSocket probe of this port until the channel closes.
	hold map[int32]chan struct{}
	held int // probes that reached a hold
}

func (f *fakeProber) Probe(_ context.Context, t probespec.ProbeType, spec *v1.Probe, target prober.Target, _ prober.EventSink) (results.Result, string, error) {
	f.mu.Lock()
	f.calls[target.ContainerID+"/"+t.String()]++
	if spec != nil && spec.TCPSocket != nil {
		if ch, ok := f.hold[spec.TCPSocket.Port.IntVal]; ok {
			f.held++
			f.mu.Unlock()
			<-ch
			f.mu.Lock()
		}
	}
	defer f.mu.Unlock()
	if r, ok := f.result[target.ContainerID]; ok {
		return r, "out", nil
	}
	return results.Success, "ok", nil
}

// sink records the latest desired state per pod.
type sink struct {
	mu       sync.Mutex
	states   map[types.UID]status.PodState
	forgot   map[types.UID]bool
	setCall  int
	notReady map[types.UID]int // desired states with a container not ready
	ready    map[types.UID]int // desired states with every container ready
}

func (s *sink) Set(k status.PodKey, d status.PodState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[k.UID] = d
	s.setCall++
	allReady := len(d.Containers) > 0
	for _, c := range d.Containers {
		if !c.Ready {
			allReady = false
			if s.notReady == nil {
				s.notReady = map[types.UID]int{}
			}
			s.notReady[k.UID]++
			break
		}
	}
	if allReady {
		if s.ready == nil {
			s.ready = map[types.UID]int{}
		}
		s.ready[k.UID]++
	}
}

func (s *sink) Forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgot[uid] = true
}

func (s *sink) get(uid types.UID) (status.PodState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[uid]
	return st, ok
}

// container is the state the sink last got for the pod's container name.
func (s *sink) container(uid types.UID, name string) (status.ContainerState, bool) {
	st, _ := s.get(uid)
	for _, c := range st.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return status.ContainerState{}, false
}

type recEvent struct{ container, eventType, reason, message string }

type recorder struct {
	mu     sync.Mutex
	events []recEvent
}

func (r *recorder) Event(_ *v1.Pod, c, t, reason, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recEvent{c, t, reason, msg})
}

func (r *recorder) count(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.reason == reason {
			n++
		}
	}
	return n
}

type env struct {
	reg    *prometheus.Registry
	t      *testing.T
	client *fake.Clientset
	mgr    *Manager
	sink   *sink
	rec    *recorder
	prober *fakeProber
	cancel context.CancelFunc
	done   chan struct{}
}

func newEnv(t *testing.T, src probespec.ProbeSource) *env {
	t.Helper()
	client := fake.NewClientset()
	watching := informertest.WatchStarted(client, "pods")
	factory := informers.NewSharedInformerFactory(client, 0)
	e := &env{
		t: t, client: client,
		sink:   &sink{states: map[types.UID]status.PodState{}, forgot: map[types.UID]bool{}},
		rec:    &recorder{},
		prober: &fakeProber{result: map[string]results.Result{}, calls: map[string]int{}},
		done:   make(chan struct{}),
	}
	e.reg = prometheus.NewRegistry()
	mgr, err := New(Options{
		Informer:             factory.Core().V1().Pods().Informer(),
		RequireReadinessGate: true,
		Metrics:              NewMetrics(e.reg),
		Source:               src,
		Prober:               e.prober,
		Recorder:             e.rec,
		Status:               e.sink,
		// Long ago: no jitter, so first probes run at once.
		DaemonStart: time.Now().Add(-time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.mgr = mgr
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	informertest.Wait(t, watching)
	go func() { defer close(e.done); mgr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-e.done
		factory.Shutdown()
	})
	return e
}

func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		e.sink.mu.Lock()
		for uid, st := range e.sink.states {
			e.t.Logf("desired state of %s: %+v", uid, st)
		}
		e.sink.mu.Unlock()
		for _, s := range e.mgr.Snapshots() {
			e.t.Logf("worker %s/%s/%s: %s %s", s.PodName, s.Container, s.ProbeType, s.State, s.LastResult)
		}
		e.t.Fatalf("timed out waiting for %s", what)
	}
}

func annotate(probes map[string]map[string]any) string {
	b, _ := json.Marshal(probes)
	return string(b)
}

func runningPod(name, uid string, annotation string, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid), Annotations: map[string]string{}},
		Spec:       v1.PodSpec{NodeName: "n1", RestartPolicy: v1.RestartPolicyAlways},
		Status:     v1.PodStatus{Phase: v1.PodRunning, PodIP: "127.0.0.1"},
	}
	if annotation != "" {
		p.Annotations[probespec.ProbesAnnotation] = annotation
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "img"})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{
			Name: c, ContainerID: "containerd://" + uid + "-" + c,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Minute))}},
		})
	}
	return p
}

var (
	tcp1 = map[string]any{"tcpSocket": map[string]any{"port": 1}, "periodSeconds": 1}
	tcp2 = map[string]any{"tcpSocket": map[string]any{"port": 2}, "periodSeconds": 1}
)

func (e *env) create(p *v1.Pod) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) update(p *v1.Pod) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Pods(p.Namespace).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) workers() map[string]string {
	out := map[string]string{}
	for _, s := range e.mgr.Snapshots() {
		out[s.PodName+"/"+s.Container+"/"+s.ProbeType] = s.Spec
	}
	return out
}

func TestWorkersFollowPodLifecycle(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	pod := runningPod("p", "u1", annotate(map[string]map[string]any{
		"app": {"readinessProbe": tcp1, "livenessProbe": tcp1},
	}), "app", "other")
	e.create(pod)
	e.eventually("two workers", func() bool { return e.mgr.WorkerCount() == 2 })
	e.eventually("ready state", func() bool {
		st, ok := e.sink.get("u1")
		return ok && len(st.Containers) == 1 && st.Containers[0].Ready
	})

	// Edit only the readiness probe: the liveness worker and its state stay.
	var liveBefore any
	for _, s := range e.mgr.Snapshots() {
		if s.ProbeType == "Liveness" {
			liveBefore = s
		}
	}
	_ = liveBefore
	livenessWorker := e.mgr.pods["u1"].workers[probeKey{"app", probespec.Liveness}]
	readinessWorker := e.mgr.pods["u1"].workers[probeKey{"app", probespec.Readiness}]
	pod.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{
		"app": {"readinessProbe": tcp2, "livenessProbe": tcp1},
	})
	e.update(pod)
	e.eventually("readiness worker replaced", func() bool {
		e.mgr.mu.Lock()
		defer e.mgr.mu.Unlock()
		ent := e.mgr.pods["u1"]
		return ent != nil && ent.workers[probeKey{"app", probespec.Readiness}] != readinessWorker
	})
	<-readinessWorker.Done()
	e.mgr.mu.Lock()
	same := e.mgr.pods["u1"].workers[probeKey{"app", probespec.Liveness}] == livenessWorker
	e.mgr.mu.Unlock()
	if !same {
		t.Fatal("an unchanged liveness probe lost its worker on an edit")
	}
	select {
	case <-livenessWorker.Done():
		t.Fatal("unchanged liveness worker stopped")
	default:
	}
	e.eventually("replacement ready again", func() bool {
		st, ok := e.sink.get("u1")
		return ok && len(st.Containers) == 1 && st.Containers[0].Ready
	})

	// Removing a probe from the annotation stops just that worker.
	pod.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{"app": {"readinessProbe": tcp2}})
	e.update(pod)
	e.eventually("liveness worker stopped", func() bool { return e.mgr.WorkerCount() == 1 })
	<-livenessWorker.Done()

	if err := e.client.CoreV1().Pods("ns").Delete(context.Background(), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("workers gone after delete", func() bool { return e.mgr.WorkerCount() == 0 })
	e.eventually("status forgotten", func() bool {
		e.sink.mu.Lock()
		defer e.sink.mu.Unlock()
		return e.sink.forgot["u1"]
	})
}

// An edited readiness probe gets a new worker; its condition must stay True
// from the old worker's exit until the new probe's own results say otherwise.
func TestEditedReadinessProbeKeepsItsSuccess(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	pod := runningPod("p", "u9", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
	e.create(pod)
	e.eventually("ready", func() bool {
		st, ok := e.sink.get("u9")
		return ok && len(st.Containers) == 1 && st.Containers[0].Ready
	})
	release := make(chan struct{})
	e.prober.mu.Lock()
	e.prober.hold = map[int32]chan struct{}{2: release}
	e.prober.mu.Unlock()
	e.sink.mu.Lock()
	e.sink.notReady = nil
	e.sink.mu.Unlock()
	old := e.mgr.pods["u9"].workers[probeKey{"app", probespec.Readiness}]

	pod.Annotations[probespec.ProbesAnnotation] = annotate(map[string]map[string]any{"app": {"readinessProbe": tcp2}})
	e.update(pod)
	<-old.Done()
	e.waitHeld()
	e.sink.mu.Lock()
	flips := e.sink.notReady["u9"]
	e.sink.mu.Unlock()
	if flips > 0 {
		t.Errorf("the edit made %d desired states with the container not ready before the new probe's first result", flips)
	}
	close(release)
	e.eventually("still ready after the new probe", func() bool {
		e.prober.mu.Lock()
		defer e.prober.mu.Unlock()
		return e.prober.calls["containerd://u9-app/Readiness"] >= 2
	})
	if st, _ := e.sink.get("u9"); len(st.Containers) != 1 || !st.Containers[0].Ready {
		t.Errorf("not ready after the new probe succeeded: %+v", st)
	}
}

func TestReadinessFollowsResults(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	pod := runningPod("p", "u2", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
	e.prober.mu.Lock()
	e.prober.result["containerd://u2-app"] = results.Failure
	e.prober.mu.Unlock()
	e.create(pod)
	e.eventually("not ready", func() bool {
		st, ok := e.sink.get("u2")
		return ok && len(st.Containers) == 1 && !st.Containers[0].Ready && st.Containers[0].ReadyReason == status.ReasonProbeFailed
	})
	e.prober.mu.Lock()
	e.prober.result["containerd://u2-app"] = results.Success
	e.prober.mu.Unlock()
	e.eventually("ready", func() bool {
		st, _ := e.sink.get("u2")
		return len(st.Containers) == 1 && st.Containers[0].Ready
	})
}

func TestStartupGatesReadiness(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	pod := runningPod("p", "u3", annotate(map[string]map[string]any{
		"app": {"readinessProbe": tcp1, "startupProbe": tcp2},
	}), "app")
	e.prober.mu.Lock()
	e.prober.result["containerd://u3-app"] = results.Failure
	e.prober.mu.Unlock()
	e.create(pod)
	e.eventually("waiting for startup", func() bool {
		st, ok := e.sink.get("u3")
		return ok && len(st.Containers) == 1 && !st.Containers[0].Started && st.Containers[0].ReadyReason == status.ReasonWaitingForStartup
	})
	e.prober.mu.Lock()
	readinessCalls := e.prober.calls["containerd://u3-app/Readiness"]
	e.prober.result["containerd://u3-app"] = results.Success
	e.prober.mu.Unlock()
	if readinessCalls != 0 {
		t.Fatalf("readiness probed %d times before startup succeeded", readinessCalls)
	}
	e.eventually("started and ready", func() bool {
		st, _ := e.sink.get("u3")
		return len(st.Containers) == 1 && st.Containers[0].Started && st.Containers[0].Ready
	})
}

func TestInvalidProbesReportedOnceAndOthersRun(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	bad := runningPod("bad", "u4", "{not json", "app")
	e.create(bad)
	invalidReadiness := runningPod("half", "u5", annotate(map[string]map[string]any{
		"app":   {"readinessProbe": map[string]any{"tcpSocket": map[string]any{"port": 0}}},
		"ghost": {"livenessProbe": tcp1},
		"other": {"livenessProbe": tcp1},
	}), "app", "other")
	e.create(invalidReadiness)
	good := runningPod("good", "u6", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
	e.create(good)
	e.eventually("good pod ready", func() bool {
		st, ok := e.sink.get("u6")
		return ok && len(st.Containers) == 1 && st.Containers[0].Ready
	})
	e.eventually("invalid readiness condition", func() bool {
		c, ok := e.sink.container("u5", "app")
		return ok && !c.Ready && c.ReadyReason == status.ReasonInvalidProbe
	})
	// The other container's liveness still runs.
	e.eventually("valid probe of the half-bad pod runs", func() bool {
		return e.workers()["half/other/Liveness"] != ""
	})
	// One event per problem: malformed annotation (1), bad port (1), unknown container (1).
	e.eventually("InvalidProbe events", func() bool { return e.rec.count(ReasonInvalidProbe) >= 3 })
	n := e.rec.count(ReasonInvalidProbe)
	// A resync of the same pods repeats no event.
	bad.Labels = map[string]string{"touched": "yes"}
	e.update(bad)
	invalidReadiness.Labels = map[string]string{"touched": "yes"}
	e.update(invalidReadiness)
	e.eventually("updates processed", func() bool { return e.mgr.queue.Len() == 0 })
	if got := e.rec.count(ReasonInvalidProbe); got != n {
		t.Fatalf("InvalidProbe events repeated on resync: %d -> %d", n, got)
	}
}

func TestRestartSeedKeepsReadyWithoutPendingWrite(t *testing.T) {
	e := newEnv(t, probespec.ProbeSourceAnnotation)
	pod := runningPod("p", "u7", annotate(map[string]map[string]any{"app": {"readinessProbe": tcp1}}), "app")
	// As left by an earlier probed: Ready since after the container started.
	pod.Status.Conditions = []v1.PodCondition{{
		Type: status.ReadyConditionType("app"), Status: v1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-30 * time.Second)),
	}}
	e.prober.mu.Lock()
	e.prober.result["containerd://u7-app"] = results.Success
	e.prober.mu.Unlock()
	e.create(pod)
	e.eventually("first state", func() bool { _, ok := e.sink.get("u7"); return ok })
	e.sink.mu.Lock()
	defer e.sink.mu.Unlock()
	for uid, st := range e.sink.states {
		if uid == "u7" && !st.Containers[0].Ready {
			t.Fatalf("seeded pod reported not ready: %+v", st)
		}
	}
}
