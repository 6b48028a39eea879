package podinformer

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
	"k8s.io/utils/clock"
)

// KubeletListerWatcher reads the node's pods from the kubelet's Pods API
// (KEP-4188) and serves them to a client-go informer as if they came from
// the API server. It promises:
//   - the informer holds what the kubelet holds: each pod as the kubelet
//     last reported it, its status the kubelet's own (newer than the API
//     server's by the kubelet's status write);
//   - nothing is missed across a dropped stream or a kubelet restart: every
//     new stream's opening snapshot is compared with what the informer
//     holds, and the differences, deletions included, are sent on;
//   - edits the kubelet's watch does not send (it sends a pod only when its
//     own status for it changes, so an annotation edit waits for that) arrive
//     within one relist period: the stream is reopened that often and its
//     snapshot compared the same way;
//   - a pod the kubelet reports finished (DELETED) leaves the informer and
//     does not come back while the kubelet still lists it;
//   - every message is a single pod, read up to maxPodMessage bytes: no
//     call carries the node's whole pod list.
//
// Failures (FAILED_PRECONDITION while the kubelet's sources sync, a dropped
// slow watcher, a kubelet restart) end the stream; the informer's reflector
// lists again with its own back-off. Each is logged, counted by gRPC code,
// and shown by Check.
type KubeletListerWatcher struct {
	client  podsv1alpha1.PodsClient
	relist  time.Duration
	clock   clock.WithTicker
	metrics *Metrics

	mu sync.Mutex
	// known is what the informer holds, as this source last told it.
	known map[types.UID]knownPod
	// finished are pods the kubelet reported DELETED that it still lists.
	finished map[types.UID]bool
	// pending is the stream a List opened, for the Watch that follows it.
	pending *stream
	// dirty: a stopped watch may have left the informer short of known.
	dirty bool
	// health: since when no stream has been open, and why.
	downSince time.Time
	lastErr   error
}

type knownPod struct {
	namespace, name string
	sum             uint64
}

// maxPodMessage bounds one pod message. The API server stores a pod in at
// most 1.5 MiB (etcd's limit), so 4 MiB holds any pod with its status.
const maxPodMessage = 4 << 20

// DefaultKubeletSocket is the Pods API's socket under the kubelet's
// default --root-dir.
const DefaultKubeletSocket = "/var/lib/kubelet/pods-api/pods-api.sock"

// DialKubelet returns a connection to the Pods API socket at path. It
// connects lazily and reconnects after a kubelet restart within seconds,
// not gRPC's default two minutes.
func DialKubelet(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPodMessage)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 500 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}))
}

// NewKubeletListerWatcher reads pods through client, reopening its watch
// every relist.
func NewKubeletListerWatcher(client podsv1alpha1.PodsClient, relist time.Duration, m *Metrics, clk clock.WithTicker) *KubeletListerWatcher {
	if m == nil {
		m = NewMetrics(nil)
	}
	return &KubeletListerWatcher{
		client: client, relist: relist, clock: clk, metrics: m,
		known:     map[types.UID]knownPod{},
		finished:  map[types.UID]bool{},
		downSince: clk.Now(),
	}
}

// IsWatchListSemanticsUnSupported tells client-go's reflector to List and
// then Watch: the Pods API has no resource versions to resume from.
func (k *KubeletListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// List reads the kubelet's pods from a new stream's opening snapshot and
// keeps the stream for the Watch that follows.
func (k *KubeletListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return k.ListWithContext(context.Background(), opts)
}

// ListWithContext is List.
func (k *KubeletListerWatcher) ListWithContext(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	s, err := k.open(true)
	if err != nil {
		return nil, err
	}
	pods, err := s.snapshot(ctx)
	if err != nil {
		s.close()
		k.failed("listing", err, true)
		return nil, err
	}
	list := &v1.PodList{}
	k.mu.Lock()
	defer k.mu.Unlock()
	seen := make(map[types.UID]bool, len(pods))
	k.known = make(map[types.UID]knownPod, len(pods))
	k.dirty = false
	for _, p := range pods {
		seen[p.pod.UID] = true
		if k.finished[p.pod.UID] {
			continue
		}
		k.known[p.pod.UID] = knownPod{namespace: p.pod.Namespace, name: p.pod.Name, sum: p.sum}
		list.Items = append(list.Items, *p.pod)
	}
	k.forgetFinishedLocked(seen)
	if k.pending != nil {
		k.pending.close()
	}
	k.pending = s
	return list, nil
}

// Watch continues the stream of the last List, or opens a new one whose
// snapshot is compared with what the informer holds.
func (k *KubeletListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return k.WatchWithContext(context.Background(), opts)
}

// WatchWithContext is Watch.
func (k *KubeletListerWatcher) WatchWithContext(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	k.mu.Lock()
	s, dirty := k.pending, k.dirty
	k.pending = nil
	k.mu.Unlock()
	if s == nil && dirty {
		return nil, apierrors.NewResourceExpired("the informer may lack pods the kubelet sent; listing again")
	}
	synced := s != nil
	if s == nil {
		var err error
		if s, err = k.open(true); err != nil {
			return nil, err
		}
	}
	w := newKubeletWatch(ctx, k)
	go w.run(s, synced)
	return w, nil
}

// Check reports whether a stream is open. A gap shorter than grace (a
// kubelet restart) is not reported.
func (k *KubeletListerWatcher) Check(grace time.Duration) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.downSince.IsZero() {
		return nil
	}
	if d := k.clock.Since(k.downSince); d >= grace {
		if k.lastErr == nil {
			return fmt.Errorf("no watch open on the kubelet's Pods API for %v", d.Round(time.Second))
		}
		return fmt.Errorf("no watch open on the kubelet's Pods API for %v: %w", d.Round(time.Second), k.lastErr)
	}
	return nil
}

// open starts a WatchPods stream. down says no other stream serves, for
// Check, if it fails.
func (k *KubeletListerWatcher) open(down bool) (*stream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	c, err := k.client.WatchPods(ctx, &podsv1alpha1.WatchPodsRequest{})
	if err != nil {
		cancel()
		k.failed("opening a watch", err, down)
		return nil, err
	}
	k.metrics.watches.Inc()
	return &stream{recv: c.Recv, cancel: cancel, done: make(chan struct{})}, nil
}

// up records an open, synced stream.
func (k *KubeletListerWatcher) up() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.downSince.IsZero() && k.lastErr != nil {
		klog.InfoS("Watching pods through the kubelet's Pods API again")
	}
	k.downSince, k.lastErr = time.Time{}, nil
}

// failed records a failed call or an ended stream: a log line, the metric
// by gRPC code, and, when no stream serves any more (down), Check's reason.
func (k *KubeletListerWatcher) failed(what string, err error, down bool) {
	code := grpcCode(err)
	k.metrics.errors.WithLabelValues(code).Inc()
	if down {
		k.mu.Lock()
		if k.downSince.IsZero() {
			k.downSince = k.clock.Now()
		}
		k.lastErr = err
		k.mu.Unlock()
	}
	klog.InfoS("Kubelet Pods API: "+what+" failed; the informer retries with back-off", "code", code, "reason", explain(code), "err", err)
}

func (k *KubeletListerWatcher) forgetFinishedLocked(seen map[types.UID]bool) {
	for uid := range k.finished {
		if !seen[uid] {
			delete(k.finished, uid)
		}
	}
}

// stream is one WatchPods call.
type stream struct {
	recv   func() (*podsv1alpha1.WatchPodsEvent, error)
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (s *stream) close() {
	s.once.Do(func() { s.cancel(); close(s.done) })
}

type decoded struct {
	pod *v1.Pod
	sum uint64
}

// snapshot reads the stream's opening ADDED events up to
// INITIAL_SYNC_COMPLETE.
func (s *stream) snapshot(ctx context.Context) ([]decoded, error) {
	stop := context.AfterFunc(ctx, s.cancel)
	defer stop()
	var pods []decoded
	for {
		ev, err := s.recv()
		if err != nil {
			return nil, err
		}
		switch ev.GetType() {
		case podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE:
			return pods, nil
		case podsv1alpha1.EventType_ADDED, podsv1alpha1.EventType_MODIFIED:
			d, err := decode(ev.GetPod())
			if err != nil {
				return nil, err
			}
			pods = append(pods, d)
		}
	}
}

func decode(b []byte) (decoded, error) {
	p := &v1.Pod{}
	if err := p.Unmarshal(b); err != nil {
		return decoded{}, fmt.Errorf("decoding a pod from the kubelet: %w", err)
	}
	if p.UID == "" {
		return decoded{}, errors.New("the kubelet sent a pod without a UID")
	}
	return decoded{pod: p, sum: sum(b)}, nil
}

// sum tells one report of a pod from the next: the kubelet marshals pods
// deterministically, so equal bytes are an unchanged pod.
func sum(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

var _ cache.ListerWatcherWithContext = (*KubeletListerWatcher)(nil)
var _ cache.ListerWatcher = (*KubeletListerWatcher)(nil)
