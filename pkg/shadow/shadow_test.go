package shadow

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/internal/metricstest"
	"github.com/probed-dev/probed/pkg/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node is a fake of both sides: probed's verdicts (Desired) and the pods
// with the kubelet's status (Pods).
type node struct {
	mu      sync.Mutex
	desired map[types.UID]status.DesiredPod
	pods    map[types.UID]*v1.Pod
}

func (n *node) Desired() []status.DesiredPod {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []status.DesiredPod
	for _, d := range n.desired {
		out = append(out, d)
	}
	return out
}

func (n *node) Pod(uid types.UID) (*v1.Pod, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.pods[uid]
	return p, ok
}

// set makes pod web's container app, running, have probed's verdict
// probedReady and the kubelet's kubeletReady (readiness, period 2s), and
// for the sidecar log, probed's and the kubelet's startup verdicts.
func (n *node) set(probedReady, kubeletReady, probedStarted bool, kubeletStarted *bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	always := v1.ContainerRestartPolicyAlways
	n.pods["uid-web"] = &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "uid-web"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "app", ReadinessProbe: &v1.Probe{PeriodSeconds: 2}}},
			// A sidecar; its startup probe has the API's default period.
			InitContainers: []v1.Container{{Name: "log", RestartPolicy: &always, StartupProbe: &v1.Probe{}}},
		},
		Status: v1.PodStatus{
			ContainerStatuses:     []v1.ContainerStatus{{Name: "app", Ready: kubeletReady, State: running}},
			InitContainerStatuses: []v1.ContainerStatus{{Name: "log", Started: kubeletStarted, State: running}},
		},
	}
	n.desired["uid-web"] = status.DesiredPod{
		Key: status.PodKey{Namespace: "shop", Name: "web", UID: "uid-web"},
		State: status.PodState{Containers: []status.ContainerState{
			{Name: "app", HasReadiness: true, Ready: probedReady, Started: true},
			{Name: "log", HasStartup: true, Started: probedStarted, Ready: probedStarted},
		}},
	}
}

func newTest(t *testing.T) (*node, *Comparer, *clocktesting.FakeClock, *Metrics, *prometheus.Registry) {
	t.Helper()
	n := &node{desired: map[types.UID]status.DesiredPod{}, pods: map[types.UID]*v1.Pod{}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	return n, New(Options{Desired: n, Pods: n, Clock: clk, Metrics: m}), clk, m, reg
}

func values(m *Metrics, probeType string) (ongoing, total float64) {
	return testutil.ToFloat64(m.ongoing.WithLabelValues(probeType)), testutil.ToFloat64(m.total.WithLabelValues(probeType))
}

func yes() *bool { b := true; return &b }

// A readiness difference counts once it has lasted two periods (2 s) and
// the slack (10 s): counted once however long it lasts, ongoing until the
// two agree; a new one counts again. The sidecar's startup verdicts agree
// throughout.
func TestReadinessDifferenceCountsAfterGrace(t *testing.T) {
	n, c, clk, m, reg := newTest(t)
	n.set(true, true, true, yes())
	c.Compare()
	if o, tot := values(m, "Readiness"); o != 0 || tot != 0 {
		t.Fatalf("agreeing: ongoing %v, total %v", o, tot)
	}
	// probed refuses the probe (say, a node-local host): not ready; the
	// kubelet's is ready.
	n.set(false, true, true, yes())
	for _, step := range []time.Duration{0, 5 * time.Second, 5 * time.Second, 3900 * time.Millisecond} { // 13.9 s
		clk.Step(step)
		c.Compare()
		if o, tot := values(m, "Readiness"); o != 0 || tot != 0 {
			t.Fatalf("%v into the difference: ongoing %v, total %v; want none before 14 s", clk.Now().Sub(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)), o, tot)
		}
	}
	for range 5 {
		clk.Step(5 * time.Second)
		c.Compare()
		if o, tot := values(m, "Readiness"); o != 1 || tot != 1 {
			t.Fatalf("a difference past its grace: ongoing %v, total %v; want 1 and 1", o, tot)
		}
	}
	n.set(true, true, true, yes())
	c.Compare()
	if o, tot := values(m, "Readiness"); o != 0 || tot != 1 {
		t.Fatalf("agreeing again: ongoing %v, total %v; want 0 and 1", o, tot)
	}
	// The other way round this time: probed ready, the kubelet not.
	n.set(true, false, true, yes())
	c.Compare()
	clk.Step(14 * time.Second)
	c.Compare()
	if o, tot := values(m, "Readiness"); o != 1 || tot != 2 {
		t.Fatalf("a second difference: ongoing %v, total %v; want 1 and 2", o, tot)
	}
	if o, tot := values(m, "Startup"); o != 0 || tot != 0 {
		t.Errorf("the sidecar's startup: ongoing %v, total %v; they agreed", o, tot)
	}
	metricstest.Lint(t, reg)
}

// Two probers a moment apart on a flapping endpoint: each difference
// shorter than the grace, none counted.
func TestShortDifferencesDoNotCount(t *testing.T) {
	n, c, clk, m, _ := newTest(t)
	for i := range 40 {
		n.set(i%4 != 0, i%4 != 1, true, yes()) // disagree 2 comparisons in 4, 5 s each
		c.Compare()
		clk.Step(5 * time.Second)
	}
	if o, tot := values(m, "Readiness"); o != 0 || tot != 0 {
		t.Errorf("flapping: ongoing %v, total %v; want none", o, tot)
	}
}

// A sidecar's startup probe: the kubelet's started (nil is not started)
// against probed's, with the API's default period (grace 30 s).
func TestStartupDifference(t *testing.T) {
	n, c, clk, m, _ := newTest(t)
	n.set(true, true, true, nil)
	c.Compare()
	clk.Step(29 * time.Second)
	c.Compare()
	if o, _ := values(m, "Startup"); o != 0 {
		t.Fatalf("29 s into a startup difference (grace 30 s): ongoing %v", o)
	}
	clk.Step(time.Second)
	c.Compare()
	if o, tot := values(m, "Startup"); o != 1 || tot != 1 {
		t.Errorf("30 s into it: ongoing %v, total %v; want 1 and 1", o, tot)
	}
}

// Containers not running are not compared, and a pod gone takes its
// differences with it: what the comparer holds is bounded by the node's
// containers.
func TestNotRunningAndGonePods(t *testing.T) {
	n, c, clk, m, _ := newTest(t)
	n.set(false, true, true, yes())
	n.pods["uid-web"].Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	c.Compare()
	clk.Step(time.Minute)
	c.Compare()
	if o, tot := values(m, "Readiness"); o != 0 || tot != 0 || len(c.open) != 0 {
		t.Fatalf("a waiting container: ongoing %v, total %v, open %d", o, tot, len(c.open))
	}
	n.set(false, true, true, yes())
	c.Compare()
	clk.Step(time.Minute)
	c.Compare()
	if o, _ := values(m, "Readiness"); o != 1 {
		t.Fatalf("running again: ongoing %v", o)
	}
	delete(n.pods, "uid-web")
	delete(n.desired, "uid-web")
	c.Compare()
	if o, tot := values(m, "Readiness"); o != 0 || tot != 1 || len(c.open) != 0 {
		t.Errorf("the pod gone: ongoing %v, total %v, open %d; want 0, 1, 0", o, tot, len(c.open))
	}
}

// Run compares on its ticker and stops with its context.
func TestRun(t *testing.T) {
	n, c, clk, m, _ := newTest(t)
	n.set(false, true, true, yes())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if o, _ := values(m, "Readiness"); o == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run never counted the difference")
		}
		if clk.HasWaiters() {
			clk.Step(DefaultInterval)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}
