package podinformer

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeKubelet serves the Pods API over a real unix socket as the kubelet's
// server does (pkg/kubelet/apis/pods/server.go): FAILED_PRECONDITION until
// ready, a snapshot of ADDED then INITIAL_SYNC_COMPLETE, then events.
type fakeKubelet struct {
	podsv1alpha1.UnimplementedPodsServer
	mu       sync.Mutex
	pods     map[types.UID]*v1.Pod
	notReady bool
	watchers map[chan *podsv1alpha1.WatchPodsEvent]struct{}
	opened   int
	srv      *grpc.Server
	socket   string
}

func startFakeKubelet(t *testing.T, socket string) *fakeKubelet {
	t.Helper()
	f := &fakeKubelet{pods: map[types.UID]*v1.Pod{}, watchers: map[chan *podsv1alpha1.WatchPodsEvent]struct{}{}, socket: socket}
	f.serve(t)
	return f
}

func (f *fakeKubelet) serve(t *testing.T) {
	t.Helper()
	l, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = grpc.NewServer()
	podsv1alpha1.RegisterPodsServer(f.srv, f)
	go func() { _ = f.srv.Serve(l) }()
	t.Cleanup(f.srv.Stop)
}

func (f *fakeKubelet) WatchPods(_ *podsv1alpha1.WatchPodsRequest, s podsv1alpha1.Pods_WatchPodsServer) error {
	f.mu.Lock()
	if f.notReady {
		f.mu.Unlock()
		return status.Error(codes.FailedPrecondition, "Kubelet is initializing")
	}
	f.opened++
	ch := make(chan *podsv1alpha1.WatchPodsEvent, 100)
	f.watchers[ch] = struct{}{}
	var snap []*podsv1alpha1.WatchPodsEvent
	for _, p := range f.sorted() {
		snap = append(snap, &podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType_ADDED, Pod: marshal(p)})
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watchers, ch)
		f.mu.Unlock()
	}()
	for _, ev := range snap {
		if err := s.Send(ev); err != nil {
			return err
		}
	}
	if err := s.Send(&podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE}); err != nil {
		return err
	}
	for {
		select {
		case <-s.Context().Done():
			return s.Context().Err()
		case ev, ok := <-ch:
			if !ok {
				return status.Error(codes.ResourceExhausted, "watch client channel closed")
			}
			if err := s.Send(ev); err != nil {
				return err
			}
		}
	}
}

func (f *fakeKubelet) sorted() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range f.pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// set changes a pod; notify says whether the kubelet's status changed,
// which alone makes it send the pod on its watch.
func (f *fakeKubelet) set(p *v1.Pod, notify bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, existed := f.pods[p.UID]
	f.pods[p.UID] = p.DeepCopy()
	if notify {
		typ := podsv1alpha1.EventType_MODIFIED
		if !existed {
			typ = podsv1alpha1.EventType_ADDED
		}
		f.broadcastLocked(&podsv1alpha1.WatchPodsEvent{Type: typ, Pod: marshal(p)})
	}
}

// finish reports the pod finished (DELETED) but keeps listing it, as the
// kubelet does until the API server deletes it.
func (f *fakeKubelet) finish(p *v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stub := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID}}
	f.broadcastLocked(&podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType_DELETED, Pod: marshal(stub)})
}

// remove forgets a pod without a word, as after a dropped event.
func (f *fakeKubelet) remove(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, uid)
}

// dropWatchers ends every stream as the kubelet drops a slow watcher.
func (f *fakeKubelet) dropWatchers() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.watchers {
		delete(f.watchers, ch)
		close(ch)
	}
}

func (f *fakeKubelet) broadcastLocked(ev *podsv1alpha1.WatchPodsEvent) {
	for ch := range f.watchers {
		ch <- ev
	}
}

func (f *fakeKubelet) streams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened
}

func marshal(p *v1.Pod) []byte {
	b, err := p.Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

func testPod(uid, name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: "1",
			Annotations: map[string]string{"probed.io/probes": `{"app":{"readiness":{"tcpSocket":{"port":8080}}}}`}},
		Spec:   v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "app"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIPs: []v1.PodIP{{IP: "10.0.0.1"}}},
	}
}

type rig struct {
	kubelet *fakeKubelet
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
	r := &rig{kubelet: startFakeKubelet(t, socket), clock: clocktesting.NewFakeClock(time.Now()), reg: prometheus.NewRegistry()}
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
	before := r.kubelet.streams()
	r.clock.Step(15 * time.Second)
	eventually(t, "a new stream", func() bool { return r.kubelet.streams() > before })
}

func TestKubeletSourceFollowsTheKubelet(t *testing.T) {
	r := newRig(t, false)
	a, b := testPod("a", "pod-a"), testPod("b", "pod-b")
	r.kubelet.set(a, true)
	r.kubelet.set(b, true)
	r.start(t)
	eventually(t, "sync", r.inf.HasSynced)
	if n := len(r.inf.GetStore().List()); n != 2 {
		t.Fatalf("%d pods cached, want 2", n)
	}

	// A status change the kubelet sends on its watch.
	a.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", ContainerID: "containerd://abc", Ready: true}}
	r.kubelet.set(a, true)
	eventually(t, "a's container ID", func() bool {
		p := r.cached("a")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].ContainerID == "containerd://abc"
	})

	// An annotation edit the kubelet does not send: it arrives with the
	// next relist, not before.
	a = a.DeepCopy()
	a.ResourceVersion = "2"
	a.Annotations["probed.io/probes"] = `{"app":{"readiness":{"tcpSocket":{"port":9090}}}}`
	r.kubelet.set(a, false)
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
	r.kubelet.set(c, true)
	eventually(t, "c", func() bool { return r.cached("c") != nil })
	r.kubelet.remove("c")
	r.relist(t)
	eventually(t, "c gone through the relist", func() bool { return r.cached("c") == nil })

	// A pod the kubelet reports finished leaves, and stays out through
	// relists while the kubelet still lists it.
	r.kubelet.finish(b)
	eventually(t, "b's deletion", func() bool { return r.cached("b") == nil })
	r.relist(t)
	r.relist(t)
	if r.cached("b") != nil {
		t.Fatal("a finished pod came back with a relist")
	}
	// Once the kubelet no longer lists it, a pod with its UID is new again.
	r.kubelet.remove("b")
	r.relist(t)
	r.kubelet.set(b, true)
	eventually(t, "b again", func() bool { return r.cached("b") != nil })
	if err := r.lw.Check(0); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func TestKubeletSourceRecoversWhatADroppedWatchMissed(t *testing.T) {
	r := newRig(t, false)
	a, b := testPod("a", "pod-a"), testPod("b", "pod-b")
	r.kubelet.set(a, true)
	r.kubelet.set(b, true)
	r.start(t)
	eventually(t, "sync", r.inf.HasSynced)

	// While no watch is open, b goes and c comes, and the kubelet sends
	// nothing: the next stream's snapshot must say so.
	r.kubelet.mu.Lock()
	r.kubelet.notReady = true
	r.kubelet.mu.Unlock()
	r.kubelet.dropWatchers()
	eventually(t, "the dropped watch counted", func() bool {
		return testutil.ToFloat64(r.metrics.errors.WithLabelValues("ResourceExhausted")) == 1
	})
	r.kubelet.remove("b")
	c := testPod("c", "pod-c")
	r.kubelet.set(c, false)
	eventually(t, "FailedPrecondition while the kubelet syncs", func() bool {
		return testutil.ToFloat64(r.metrics.errors.WithLabelValues("FailedPrecondition")) >= 1
	})
	if err := r.lw.Check(0); err == nil || !strings.Contains(err.Error(), "Kubelet is initializing") {
		t.Errorf("Check = %v, want the kubelet's reason", err)
	}
	if r.cached("a") == nil || r.cached("b") == nil {
		t.Fatal("the informer dropped pods while the kubelet was away")
	}
	r.kubelet.mu.Lock()
	r.kubelet.notReady = false
	r.kubelet.mu.Unlock()
	eventually(t, "b gone and c come", func() bool { return r.cached("b") == nil && r.cached("c") != nil && r.cached("a") != nil })
	eventually(t, "Check healthy", func() bool { return r.lw.Check(0) == nil })
}

func TestKubeletSourceFollowsAKubeletRestart(t *testing.T) {
	r := newRig(t, false)
	a := testPod("a", "pod-a")
	r.kubelet.set(a, true)
	r.start(t)
	eventually(t, "sync", r.inf.HasSynced)

	// The kubelet goes away (its socket with it) and comes back with a
	// new server; the pod changed meanwhile.
	r.kubelet.srv.Stop()
	os.Remove(r.kubelet.socket)
	a = a.DeepCopy()
	a.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.2"}}
	pods := map[types.UID]*v1.Pod{"a": a}
	eventually(t, "the ended stream counted", func() bool {
		return testutil.ToFloat64(r.metrics.errors.WithLabelValues("Unavailable")) >= 1
	})
	r.kubelet.mu.Lock()
	r.kubelet.pods = pods
	r.kubelet.watchers = map[chan *podsv1alpha1.WatchPodsEvent]struct{}{}
	r.kubelet.mu.Unlock()
	r.kubelet.serve(t)
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
	r.kubelet.mu.Lock()
	r.kubelet.notReady = true
	r.kubelet.mu.Unlock()
	if s, why := Choose(context.Background(), SourceAuto, r.kubelet.socket, time.Second); s != SourceKubelet || !strings.Contains(why, "syncing") {
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
