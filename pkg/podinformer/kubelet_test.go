package podinformer

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probed-dev/probed/pkg/podinformer/kubelettest"
)

func testPod(uid, name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: "1",
			Annotations: map[string]string{"probed.io/probes": `{"app":{"readiness":{"tcpSocket":{"port":8080}}}}`}},
		Spec:   v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "app"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIPs: []v1.PodIP{{IP: "10.0.0.1"}}},
	}
}

type rig struct {
	kubelet *kubelettest.Kubelet
	lw      *KubeletListerWatcher
	inf     cache.SharedIndexInformer
	clock   *clocktesting.FakeClock
	reg     *prometheus.Registry
	metrics *Metrics
}

// newRig starts the fake kubelet and, unless start is false, the informer.
func newRig(t *testing.T, start bool) *rig {
	t.Helper()
	dir, err := os.MkdirTemp("", "pods-api")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "pods-api.sock")
	r := &rig{kubelet: kubelettest.Start(t, socket), clock: clocktesting.NewFakeClock(time.Now()), reg: prometheus.NewRegistry()}
	conn, err := DialKubelet(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r.metrics = NewMetrics(r.reg)
	r.lw = NewKubeletListerWatcher(podsv1alpha1.NewPodsClient(conn), 15*time.Second, r.metrics, r.clock)
	if r.inf, err = NewFromKubelet(r.lw); err != nil {
		t.Fatal(err)
	}
	if start {
		r.start(t)
	}
	return r
}

// syncedRig is a rig whose kubelet holds pods and whose informer has
// synced them.
func syncedRig(t *testing.T, pods ...*v1.Pod) *rig {
	t.Helper()
	r := newRig(t, false)
	for _, p := range pods {
		r.kubelet.Set(p, true)
	}
	r.start(t)
	eventually(t, "sync", r.inf.HasSynced)
	return r
}

func (r *rig) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.inf.RunWithContext(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func (r *rig) cached(uid types.UID) *v1.Pod {
	for _, o := range r.inf.GetStore().List() {
		if p := o.(*v1.Pod); p.UID == uid {
			return p
		}
	}
	return nil
}

// relist moves the fake clock one relist period on, once the watch's
// ticker waits on it, and waits for the new stream.
func (r *rig) relist(t *testing.T) {
	t.Helper()
	eventually(t, "the watch's relist ticker", r.clock.HasWaiters)
	before := r.kubelet.Streams()
	r.clock.Step(15 * time.Second)
	eventually(t, "a new stream", func() bool { return r.kubelet.Streams() > before })
}

func TestKubeletSourceFollowsTheKubelet(t *testing.T) {
	a, b := testPod("a", "pod-a"), testPod("b", "pod-b")
	r := syncedRig(t, a, b)
	if n := len(r.inf.GetStore().List()); n != 2 {
		t.Fatalf("%d pods cached, want 2", n)
	}

	// A status change the kubelet sends on its watch.
	a.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", ContainerID: "containerd://abc", Ready: true}}
	r.kubelet.Set(a, true)
	eventually(t, "a's container ID", func() bool {
		p := r.cached("a")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].ContainerID == "containerd://abc"
	})

	// An annotation edit the kubelet does not send: it arrives with the
	// next relist, not before.
	a = a.DeepCopy()
	a.ResourceVersion = "2"
	a.Annotations["probed.io/probes"] = `{"app":{"readiness":{"tcpSocket":{"port":9090}}}}`
	r.kubelet.Set(a, false)
	if got := r.cached("a").Annotations["probed.io/probes"]; strings.Contains(got, "9090") {
		t.Fatal("the edit arrived without a relist: the test shows nothing")
	}
	r.relist(t)
	eventually(t, "the edit through the relist", func() bool {
		return strings.Contains(r.cached("a").Annotations["probed.io/probes"], "9090")
	})

	// A pod the kubelet stopped listing without a word (its event
	// dropped) leaves with the next relist.
	c := testPod("c", "pod-c")
	r.kubelet.Set(c, true)
	eventually(t, "c", func() bool { return r.cached("c") != nil })
	r.kubelet.Remove("c")
	r.relist(t)
	eventually(t, "c gone through the relist", func() bool { return r.cached("c") == nil })

	// A pod the kubelet reports finished leaves, and stays out through
	// relists while the kubelet still lists it.
	r.kubelet.Finish(b)
	eventually(t, "b's deletion", func() bool { return r.cached("b") == nil })
	r.relist(t)
	r.relist(t)
	if r.cached("b") != nil {
		t.Fatal("a finished pod came back with a relist")
	}
	// Once the kubelet no longer lists it, a pod with its UID is new again.
	r.kubelet.Remove("b")
	r.relist(t)
	r.kubelet.Set(b, true)
	eventually(t, "b again", func() bool { return r.cached("b") != nil })
	if err := r.lw.Check(0); err != nil {
		t.Errorf("Check: %v", err)
	}

	// A relist the kubelet refuses leaves the open stream serving, and
	// healthy: Check reports no outage.
	r.kubelet.SetReady(false)
	eventually(t, "the relist ticker", r.clock.HasWaiters)
	r.clock.Step(15 * time.Second)
	eventually(t, "the refused relist counted", func() bool {
		return testutil.ToFloat64(r.metrics.errors.WithLabelValues("FailedPrecondition")) == 1
	})
	if err := r.lw.Check(0); err != nil {
		t.Errorf("Check after a refused relist, the stream still open: %v", err)
	}
	a = a.DeepCopy()
	a.Status.Phase = v1.PodSucceeded
	r.kubelet.Set(a, true)
	eventually(t, "a change on the stream still open", func() bool { return r.cached("a").Status.Phase == v1.PodSucceeded })
}

func TestKubeletSourceRecoversWhatADroppedWatchMissed(t *testing.T) {
	a, b := testPod("a", "pod-a"), testPod("b", "pod-b")
	r := syncedRig(t, a, b)

	// While no watch is open, b goes and c comes, and the kubelet sends
	// nothing: the next stream's snapshot must say so.
	r.kubelet.SetReady(false)
	r.kubelet.DropWatchers()
	eventually(t, "the dropped watch counted", func() bool {
		return testutil.ToFloat64(r.metrics.errors.WithLabelValues("ResourceExhausted")) == 1
	})
	r.kubelet.Remove("b")
	c := testPod("c", "pod-c")
	r.kubelet.Set(c, false)
	eventually(t, "FailedPrecondition while the kubelet syncs", func() bool {
		return testutil.ToFloat64(r.metrics.errors.WithLabelValues("FailedPrecondition")) >= 1
	})
	if err := r.lw.Check(0); err == nil || !strings.Contains(err.Error(), "Kubelet is initializing") {
		t.Errorf("Check = %v, want the kubelet's reason", err)
	}
	if r.cached("a") == nil || r.cached("b") == nil {
		t.Fatal("the informer dropped pods while the kubelet was away")
	}
	r.kubelet.SetReady(true)
	eventually(t, "b gone and c come", func() bool { return r.cached("b") == nil && r.cached("c") != nil && r.cached("a") != nil })
	eventually(t, "Check healthy", func() bool { return r.lw.Check(0) == nil })
}

func TestKubeletSourceFollowsAKubeletRestart(t *testing.T) {
	a := testPod("a", "pod-a")
	r := syncedRig(t, a)

	// The kubelet goes away (its socket with it) and comes back with a
	// new server; the pod changed meanwhile.
	r.kubelet.Stop()
	a = a.DeepCopy()
	a.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.2"}}
	eventually(t, "the ended stream counted", func() bool {
		return testutil.ToFloat64(r.metrics.errors.WithLabelValues("Unavailable")) >= 1
	})
	r.kubelet.Replace(a)
	r.kubelet.Serve(t)
	eventually(t, "the new pod IP", func() bool {
		p := r.cached("a")
		return p != nil && len(p.Status.PodIPs) == 1 && p.Status.PodIPs[0].IP == "10.0.0.2"
	})
}

func TestChooseSource(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.sock")
	if s, why := Choose(context.Background(), SourceAuto, missing, time.Second); s != SourceAPIServer || !strings.Contains(why, "no Pods API socket") {
		t.Errorf("no socket: %s (%s)", s, why)
	}
	if s, _ := Choose(context.Background(), SourceKubelet, missing, time.Second); s != SourceKubelet {
		t.Errorf("--pod-source=kubelet chose %s", s)
	}
	if s, _ := Choose(context.Background(), SourceAPIServer, missing, time.Second); s != SourceAPIServer {
		t.Errorf("--pod-source=apiserver chose %s", s)
	}

	r := newRig(t, false)
	r.kubelet.SetReady(false)
	if s, why := Choose(context.Background(), SourceAuto, r.kubelet.Socket, time.Second); s != SourceKubelet || !strings.Contains(why, "syncing") {
		t.Errorf("a syncing kubelet: %s (%s)", s, why)
	}

	// A kubelet without the API (the gate off) answers Unimplemented.
	other := filepath.Join(dir, "gate-off.sock")
	l, err := net.Listen("unix", other)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	if s, why := Choose(context.Background(), SourceAuto, other, time.Second); s != SourceAPIServer || !strings.Contains(why, "does not serve") {
		t.Errorf("the gate off: %s (%s)", s, why)
	}
}
