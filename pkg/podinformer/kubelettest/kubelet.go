// Package kubelettest serves the kubelet's Pods API (KEP-4188) over a real
// unix socket for tests, as the kubelet's server does
// (pkg/kubelet/apis/pods/server.go in k8s.io/kubernetes).
package kubelettest

import (
	"net"
	"os"
	"sort"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// Kubelet serves the Pods API over a real unix socket as the kubelet's
// server does (pkg/kubelet/apis/pods/server.go): FAILED_PRECONDITION until
// ready, a snapshot of ADDED then INITIAL_SYNC_COMPLETE, then events.
type Kubelet struct {
	podsv1alpha1.UnimplementedPodsServer
	// Socket is where it serves.
	Socket   string
	mu       sync.Mutex
	pods     map[types.UID]*v1.Pod
	notReady bool
	watchers map[chan *podsv1alpha1.WatchPodsEvent]struct{}
	opened   int
	srv      *grpc.Server
}

// Start serves the Pods API on socket until the test ends.
func Start(t *testing.T, socket string) *Kubelet {
	t.Helper()
	f := &Kubelet{pods: map[types.UID]*v1.Pod{}, watchers: map[chan *podsv1alpha1.WatchPodsEvent]struct{}{}, Socket: socket}
	f.Serve(t)
	return f
}

// Serve listens on the socket again.
func (f *Kubelet) Serve(t *testing.T) {
	t.Helper()
	l, err := net.Listen("unix", f.Socket)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = grpc.NewServer()
	podsv1alpha1.RegisterPodsServer(f.srv, f)
	go func() { _ = f.srv.Serve(l) }()
	t.Cleanup(f.srv.Stop)
}

func (f *Kubelet) WatchPods(_ *podsv1alpha1.WatchPodsRequest, s podsv1alpha1.Pods_WatchPodsServer) error {
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
		snap = append(snap, &podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType_ADDED, Pod: Marshal(p)})
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

func (f *Kubelet) sorted() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range f.pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// SetReady makes WatchPods answer FAILED_PRECONDITION (false), as a
// kubelet whose pod sources have not synced, or serve again (true).
func (f *Kubelet) SetReady(ready bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notReady = !ready
}

// Stop stops the server and removes its socket, as a kubelet that goes
// away; Serve brings it back on the same socket.
func (f *Kubelet) Stop() {
	f.srv.Stop()
	os.Remove(f.Socket)
}

// Replace sets every pod the kubelet holds at once, without a word.
func (f *Kubelet) Replace(pods ...*v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = map[types.UID]*v1.Pod{}
	for _, p := range pods {
		f.pods[p.UID] = p.DeepCopy()
	}
	f.watchers = map[chan *podsv1alpha1.WatchPodsEvent]struct{}{}
}

// Set changes a pod; notify says whether the kubelet's status changed,
// which alone makes it send the pod on its watch.
func (f *Kubelet) Set(p *v1.Pod, notify bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, existed := f.pods[p.UID]
	f.pods[p.UID] = p.DeepCopy()
	if notify {
		typ := podsv1alpha1.EventType_MODIFIED
		if !existed {
			typ = podsv1alpha1.EventType_ADDED
		}
		f.broadcastLocked(&podsv1alpha1.WatchPodsEvent{Type: typ, Pod: Marshal(p)})
	}
}

// Finish reports the pod finished (DELETED) but keeps listing it, as the
// kubelet does until the API server deletes it.
func (f *Kubelet) Finish(p *v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stub := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID}}
	f.broadcastLocked(&podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType_DELETED, Pod: Marshal(stub)})
}

// Remove forgets a pod without a word, as after a dropped event.
func (f *Kubelet) Remove(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, uid)
}

// DropWatchers ends every stream as the kubelet drops a slow watcher.
func (f *Kubelet) DropWatchers() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.watchers {
		delete(f.watchers, ch)
		close(ch)
	}
}

func (f *Kubelet) broadcastLocked(ev *podsv1alpha1.WatchPodsEvent) {
	for ch := range f.watchers {
		ch <- ev
	}
}

// Streams counts the WatchPods calls served.
func (f *Kubelet) Streams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened
}

// Marshal is a pod as the kubelet sends it.
func Marshal(p *v1.Pod) []byte {
	b, err := p.Marshal()
	if err != nil {
		panic(err)
	}
	return b
}
