package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// Mode selects what probed writes (contract §2, --status-mode).
type Mode string

const (
	// ModeConditions server-side applies probed's own pod conditions.
	ModeConditions Mode = "conditions"
	// ModeContainerStatus patches containerStatuses[].ready and .started,
	// and keeps ContainersReady and Ready consistent with them.
	ModeContainerStatus Mode = "container-status"
)

// ParseMode parses a --status-mode value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeConditions, ModeContainerStatus:
		return m, nil
	}
	return "", fmt.Errorf("unknown status mode %q: want %q or %q", s, ModeConditions, ModeContainerStatus)
}

// FieldManager is the field manager of every write probed makes.
const FieldManager = "probed"

// Defaults for Options.
const (
	DefaultResync       = time.Minute
	DefaultFlushTimeout = 5 * time.Second
)

// Tuning that is not worth a flag.
const (
	// requestTimeout bounds one API request, so that one hung request
	// cannot stall the sync loop.
	requestTimeout = 10 * time.Second
	// retryBaseDelay and retryMaxDelay bound the per-pod exponential backoff.
	retryBaseDelay = 250 * time.Millisecond
	retryMaxDelay  = time.Minute
	// maxConflictAttempts bounds the read-modify-write attempts of one sync
	// in container-status mode before it backs off.
	maxConflictAttempts = 5
)

// PodKey identifies a pod. The UID tells two pods of the same name apart.
type PodKey struct {
	Namespace, Name string
	UID             types.UID
}

// PodGetter returns the latest pod for a UID, normally from the informer
// cache. The writer never mutates the pod it returns.
type PodGetter interface {
	Pod(uid types.UID) (*v1.Pod, bool)
}

// Options configure a Writer. They are validated by NewWriter.
type Options struct {
	// Client writes pod status. It may be nil only with DryRun.
	Client kubeclient.Interface
	// Pods is the informer cache. Required.
	Pods PodGetter
	// Mode defaults to ModeConditions.
	Mode Mode
	// DryRun logs, at V(2), what would be written, and writes nothing.
	DryRun bool
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Resync is the heartbeat period at which drift is repaired; default 1m.
	Resync time.Duration
	// FlushTimeout bounds the final flush when Run's context ends; default 5s.
	FlushTimeout time.Duration
	// Metrics may be nil.
	Metrics *Metrics
}

// Writer keeps pod status on the API server in line with the desired state
// of each pod's probed probes. It is the only code in probed that writes to
// the API server. It promises that:
//
//  1. Changes go out as soon as possible. Set never blocks; the sync loop
//     wakes at once and writes the pod.
//  2. The API server is never flooded. Only a change of a condition's
//     status or reason is written (never a message-only change, never once
//     per probe); all changes of one pod are coalesced into one write of the
//     latest state; one loop writes one request at a time; a failing pod
//     backs off exponentially, alone.
//  3. Nothing is lost. A failed write is retried until it succeeds or the
//     pod is gone, always with the latest desired state; on shutdown the
//     pending writes are flushed.
//  4. Drift is repaired. Every Resync the desired state of every known pod
//     is compared with the informer cache, and a real difference (say,
//     someone deleted a condition) is written again.
//  5. Nothing else is touched. In conditions mode, a server-side apply of
//     exactly probed's conditions, so others' conditions are never written
//     and a condition probed no longer wants is removed by omission. In
//     container-status mode, a read-modify-write guarded by the
//     resourceVersion, so a concurrent writer's change is never lost.
//
// The pods to write wait in a rate-limited delaying workqueue, as the
// manager's pods do: it holds each pod once however many Sets (1, 2), hands
// pods out oldest first to the one sync loop, and brings a failed pod back
// after its own exponential backoff (2, 3). While the API server as a whole
// is unavailable, the outage gate holds every pod back but one (outage.go).
//
// What counts as "already written" is what probed last wrote for the pod.
// Before probed's first write to a pod (first sight, as after a restart of
// probed), and once after the heartbeat saw drift, it is the pod in the
// informer cache instead. So a cache that lags behind probed's own writes
// never causes a duplicate write; the heartbeat trusts the cache only for
// pods probed has not written for a whole Resync. lastTransitionTime comes
// from probed's last write when there is one, else from the cache.
type Writer struct {
	opts  Options
	clock clock.WithTicker
	// limiter is the queue's per-pod backoff; the writer asks it for the
	// delay itself, to log it and to know when the backoff ends.
	limiter workqueue.TypedRateLimiter[types.UID]
	ran     atomic.Bool
	// heartbeats counts finished resyncs; tests wait on it.
	heartbeats atomic.Int64

	mu   sync.Mutex
	pods map[types.UID]*podEntry
	// queue is made by Run (its delaying loop is a goroutine); until then a
	// Set only marks its pod pending, and Run queues it.
	queue workqueue.TypedRateLimitingInterface[types.UID]
	// outage backs off every pod at once while the API server is unavailable.
	outage outageGate
	// pending counts the pods marked pending.
	pending int
}

// podEntry is what the writer knows about one pod.
type podEntry struct {
	key     PodKey
	desired PodState
	// gen counts Sets that changed the desired status or a reason; a sync
	// that finishes on an older gen leaves the pod pending.
	gen uint64
	// pending: the desired state may not be on the API server yet. The pod
	// is in the queue, backing off, or held by the outage gate.
	pending bool
	// retryAt is when the pod's backoff ends. The queue brings the pod back
	// then; a copy of it queued by a Set before that is skipped, so a new
	// state waits for the backoff too.
	retryAt time.Time
	// written is what probed last wrote; nil means "unknown, compare with
	// the informer cache".
	written *written
	// verify makes the next sync compare with the informer cache even though
	// written is known: the heartbeat saw drift. written still supplies the
	// lastTransitionTimes.
	verify bool
	// lastWrite is when written was last written.
	lastWrite time.Time
}

// written is what probed last wrote for one pod.
type written struct {
	// conditions mode: exactly the conditions applied.
	conditions []v1.PodCondition
	// container-status mode: ready/started per container, and the resulting
	// ContainersReady and Ready conditions.
	flags   map[string]containerFlags
	kubelet []v1.PodCondition
}

// NewWriter validates opts and returns a Writer. Start it with Run.
func NewWriter(opts Options) (*Writer, error) {
	var errs []error
	if opts.Pods == nil {
		errs = append(errs, errors.New("status: Options.Pods is required"))
	}
	if opts.Client == nil && !opts.DryRun {
		errs = append(errs, errors.New("status: Options.Client is required unless DryRun"))
	}
	if opts.Mode == "" {
		opts.Mode = ModeConditions
	}
	if _, err := ParseMode(string(opts.Mode)); err != nil {
		errs = append(errs, fmt.Errorf("status: %w", err))
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	switch {
	case opts.Resync == 0:
		opts.Resync = DefaultResync
	case opts.Resync < 0:
		errs = append(errs, fmt.Errorf("status: Options.Resync must be positive, got %v", opts.Resync))
	}
	switch {
	case opts.FlushTimeout == 0:
		opts.FlushTimeout = DefaultFlushTimeout
	case opts.FlushTimeout < 0:
		errs = append(errs, fmt.Errorf("status: Options.FlushTimeout must be positive, got %v", opts.FlushTimeout))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Writer{
		opts:    opts,
		clock:   opts.Clock,
		limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](retryBaseDelay, retryMaxDelay),
		pods:    map[types.UID]*podEntry{},
	}, nil
}

// Set records the complete desired state of one pod's probed probes. It never
// blocks. The latest Set for a pod wins; Sets that differ from the previous
// one only in messages do not cause a write (their messages go out with the
// next write). An empty PodState removes probed's conditions from the pod
// (conditions mode). Set may be called before Run.
func (w *Writer) Set(key PodKey, desired PodState) {
	desired.Containers = slices.Clone(desired.Containers)
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.pods[key.UID]
	if !ok {
		e = &podEntry{}
		w.pods[key.UID] = e
	}
	mark := !ok || e.key != key || !sameSignificant(e.desired, desired)
	e.key, e.desired = key, desired
	if mark {
		e.gen++
		w.markLocked(e)
	}
}

// Forget drops a pod that is gone, with any write still pending for it.
func (w *Writer) Forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.pods[uid]; ok {
		w.dropLocked(e)
	}
}

// markLocked marks the pod pending and queues it. A copy already queued or
// waiting is enough: the queue holds each pod once.
func (w *Writer) markLocked(e *podEntry) {
	w.setPendingLocked(e, true)
	if w.queue != nil {
		w.queue.Add(e.key.UID)
	}
}

func (w *Writer) setPendingLocked(e *podEntry, pending bool) {
	switch {
	case pending && !e.pending:
		w.pending++
	case !pending && e.pending:
		w.pending--
	}
	e.pending = pending
	w.opts.Metrics.setPending(w.pending)
}

// dropLocked forgets the pod. A copy of it still in the queue finds nothing
// when it comes out.
func (w *Writer) dropLocked(e *podEntry) {
	w.setPendingLocked(e, false)
	delete(w.pods, e.key.UID)
	w.outage.forget(e.key.UID)
	w.limiter.Forget(e.key.UID)
}

// Run is the sync loop. It writes pending pods, retries failed ones when
// their backoff expires, and repairs drift every Resync. When ctx ends, it
// makes one last attempt at every pending pod, ignoring backoff, bounded by
// FlushTimeout, and then returns. Run may be called once.
func (w *Writer) Run(ctx context.Context) {
	if !w.ran.CompareAndSwap(false, true) {
		klog.ErrorS(nil, "Status writer is already running")
		return
	}
	klog.InfoS("Starting status writer", "mode", w.opts.Mode, "dryRun", w.opts.DryRun, "resync", w.opts.Resync)
	defer klog.InfoS("Stopped status writer")

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(w.limiter,
		workqueue.TypedRateLimitingQueueConfig[types.UID]{Clock: w.clock})
	w.mu.Lock()
	w.queue = queue
	for _, uid := range w.pendingLocked() { // Set before Run
		queue.Add(uid)
	}
	w.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() {
		for w.processNext(ctx) {
		}
	})
	heartbeat := w.clock.NewTicker(w.opts.Resync)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-heartbeat.C():
			w.resync()
		}
	}
	heartbeat.Stop()
	queue.ShutDown()
	wg.Wait()
	w.flush(ctx)
}

// processNext syncs the next pod the queue hands out, if it may be synced
// now. It returns false once the queue is shut down or ctx has ended (the
// flush takes over).
func (w *Writer) processNext(ctx context.Context) bool {
	uid, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(uid)
	if ctx.Err() != nil {
		return false
	}
	if w.admit(uid) {
		w.syncPod(ctx, uid)
	}
	return true
}

// admit reports whether the pod the queue handed out is to be synced now.
func (w *Writer) admit(uid types.UID) bool {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.pods[uid]
	switch {
	case !ok || !e.pending:
		w.handOnLocked(uid, now) // forgotten, or written meanwhile
		return false
	case e.retryAt.After(now):
		return false // backing off: the queue brings it back
	case w.outage.closed(now):
		if w.outage.hold(uid) {
			w.queue.AddAfter(uid, w.outage.notBefore.Sub(now))
		}
		return false
	}
	w.outage.unhold(uid)
	return true
}

// handOnLocked passes the outage gate's probe on to a held pod when uid, the
// probe, leaves the gate still closed (gone, or a failure of its own), so
// that no held pod waits for a probe that never comes.
func (w *Writer) handOnLocked(uid types.UID, now time.Time) {
	if next, ok := w.outage.handOn(uid); ok {
		w.queue.AddAfter(next, w.outage.notBefore.Sub(now))
	}
}

// pendingLocked lists the pending pods, in UID order.
func (w *Writer) pendingLocked() []types.UID {
	uids := make([]types.UID, 0, w.pending)
	for uid, e := range w.pods {
		if e.pending {
			uids = append(uids, uid)
		}
	}
	slices.Sort(uids)
	return uids
}

// syncPod brings one pod's status in line with its desired state and
// records the outcome.
func (w *Writer) syncPod(ctx context.Context, uid types.UID) {
	w.mu.Lock()
	e, ok := w.pods[uid]
	if !ok {
		w.handOnLocked(uid, w.clock.Now())
		w.mu.Unlock()
		return
	}
	snap := *e
	w.mu.Unlock()

	var res syncResult
	if w.opts.Mode == ModeContainerStatus {
		res = w.syncContainerStatus(ctx, snap)
	} else {
		res = w.syncConditions(ctx, snap)
	}

	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pods[uid] != e {
		w.handOnLocked(uid, now) // forgotten while we wrote
		return
	}
	ref := klog.KRef(snap.key.Namespace, snap.key.Name)
	switch res.outcome {
	case done:
		if w.outage.active() {
			held := w.outage.reset()
			klog.InfoS("API server answers again; writing every pending pod", "pending", w.pending)
			for _, h := range held {
				w.queue.Add(h)
			}
		}
		if res.written != nil {
			e.written, e.lastWrite = res.written, now
		}
		e.verify = false
		e.retryAt = time.Time{}
		w.limiter.Forget(uid)
		if e.gen == snap.gen {
			w.setPendingLocked(e, false)
		}
	case retry:
		if apiUnavailable(res.err) {
			// The whole writer waits, and this pod probes the API server.
			delay := w.outage.fail(now, uid)
			w.queue.AddAfter(uid, delay)
			klog.ErrorS(res.err, "API server unavailable; backing off every status write", "pod", ref, "retryIn", delay)
			return
		}
		delay := w.limiter.When(uid)
		e.retryAt = now.Add(delay)
		w.queue.AddAfter(uid, delay)
		klog.ErrorS(res.err, "Failed to write pod status; will retry", "pod", ref, "podUID", uid, "retryIn", delay)
		w.handOnLocked(uid, now)
	case interrupted:
		// Still pending: the flush tries again.
	case drop:
		w.dropLocked(e)
		klog.V(2).InfoS("Pod is gone; dropping its status", "pod", ref, "podUID", uid)
		w.handOnLocked(uid, now)
	}
}

// flush makes one last attempt at every pending pod, ignoring backoff,
// within FlushTimeout.
func (w *Writer) flush(parent context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), w.opts.FlushTimeout)
	defer cancel()
	w.mu.Lock()
	uids := w.pendingLocked()
	w.mu.Unlock()
	for _, uid := range uids {
		if ctx.Err() != nil {
			break
		}
		w.syncPod(ctx, uid)
	}
	w.mu.Lock()
	left := w.pending
	w.mu.Unlock()
	if left > 0 {
		klog.InfoS("Status writer stopped with unwritten pod status", "pods", left)
	}
}
