package status

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// What counts as "already written" is what probed last wrote for the pod.
// Before probed's first write to a pod (first sight, as after a restart of
// probed), and once after the heartbeat saw drift, it is the pod in the
// informer cache instead. So a cache that lags behind probed's own writes
// never causes a duplicate write; the heartbeat trusts the cache only for
// pods probed has not written for a whole Resync. lastTransitionTime comes
// from probed's last write when there is one, else from the cache.
type Writer struct {
	opts    Options
	clock   clock.WithTicker
	limiter workqueue.TypedRateLimiter[types.UID]
	signal  chan struct{}
	ran     atomic.Bool
	// heartbeats counts finished resyncs; tests wait on it.
	heartbeats atomic.Int64

	mu   sync.Mutex
	pods map[types.UID]*podEntry
	// outage backs off every pod at once while the API server is unavailable.
	outage outageGate
	// pending holds the pods that need a sync, each with the time before
	// which it must not be retried (zero: now). It coalesces: one entry per
	// pod, however many Sets.
	pending map[types.UID]time.Time
}

// podEntry is what the writer knows about one pod.
type podEntry struct {
	key     PodKey
	desired PodState
	// gen counts Sets that changed the desired status or a reason; a sync
	// that finishes on an older gen leaves the pod pending.
	gen uint64
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
		signal:  make(chan struct{}, 1),
		pods:    map[types.UID]*podEntry{},
		pending: map[types.UID]time.Time{},
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
	e, ok := w.pods[key.UID]
	if !ok {
		e = &podEntry{}
		w.pods[key.UID] = e
	}
	mark := !ok || e.key != key || !sameSignificant(e.desired, desired)
	e.key, e.desired = key, desired
	if mark {
		e.gen++
		if _, queued := w.pending[key.UID]; !queued {
			w.pending[key.UID] = time.Time{}
		}
	}
	w.updatePendingLocked()
	w.mu.Unlock()
	if mark {
		w.notify()
	}
}

// Forget drops a pod that is gone, with any write still pending for it.
func (w *Writer) Forget(uid types.UID) {
	w.mu.Lock()
	delete(w.pods, uid)
	delete(w.pending, uid)
	w.updatePendingLocked()
	w.mu.Unlock()
	w.limiter.Forget(uid)
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

	heartbeat := w.clock.NewTicker(w.opts.Resync)
	defer heartbeat.Stop()
	for ctx.Err() == nil {
		w.syncDue(ctx)
		var retryC <-chan time.Time
		var timer clock.Timer
		if next, ok := w.nextRetry(); ok {
			d := next.Sub(w.clock.Now())
			if d <= 0 {
				continue // became due meanwhile
			}
			timer = w.clock.NewTimer(d)
			// A clock that jumped past next before the timer was set (a
			// fake one, stepped by a test) would never fire it.
			if !w.clock.Now().Before(next) {
				timer.Stop()
				continue
			}
			retryC = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-w.signal:
		case <-retryC:
		case <-heartbeat.C():
			w.resync()
		}
		if timer != nil {
			timer.Stop()
		}
	}
	w.flush(ctx)
}

func (w *Writer) notify() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *Writer) updatePendingLocked() {
	w.opts.Metrics.setPending(len(w.pending))
}

// syncDue syncs every pending pod whose backoff has expired, in passes, so
// that one busy pod cannot starve the others.
func (w *Writer) syncDue(ctx context.Context) {
	for ctx.Err() == nil {
		due := w.dueNow()
		if len(due) == 0 {
			return
		}
		for _, uid := range due {
			if ctx.Err() != nil || w.outageWait() {
				return
			}
			w.syncPod(ctx, uid)
		}
	}
}

// outageWait reports whether the writer-wide outage backoff holds writes back.
func (w *Writer) outageWait() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.outage.active() && w.clock.Now().Before(w.outage.notBefore)
}

// dueNow lists the pending pods that may be synced now, oldest first.
func (w *Writer) dueNow() []types.UID {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.outage.active() && now.Before(w.outage.notBefore) {
		return nil
	}
	var due []types.UID
	for uid, notBefore := range w.pending {
		if !notBefore.After(now) {
			due = append(due, uid)
		}
	}
	slices.SortFunc(due, func(a, b types.UID) int {
		if c := w.pending[a].Compare(w.pending[b]); c != 0 {
			return c
		}
		return strings.Compare(string(a), string(b))
	})
	if w.outage.active() && len(due) > 1 {
		due = due[:1] // probe the API server with one pod
	}
	return due
}

// nextRetry returns when the earliest backoff expires.
func (w *Writer) nextRetry() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var next time.Time
	for _, notBefore := range w.pending {
		if next.IsZero() || notBefore.Before(next) {
			next = notBefore
		}
	}
	if len(w.pending) == 0 {
		return time.Time{}, false
	}
	if w.outage.active() && next.Before(w.outage.notBefore) {
		next = w.outage.notBefore
	}
	return next, true
}

// outcome of one sync of one pod.
type outcome int

const (
	// done: the desired state is in place (written now, or already there).
	done outcome = iota
	// retry: the write failed; retry after backoff.
	retry
	// interrupted: the context ended; leave the pod pending for the flush.
	interrupted
	// drop: the pod is gone.
	drop
)

type syncResult struct {
	outcome outcome
	// written, when set, replaces the entry's written state.
	written *written
	err     error
}

// syncPod brings one pod's status in line with its desired state and
// records the outcome.
func (w *Writer) syncPod(ctx context.Context, uid types.UID) {
	w.mu.Lock()
	e, ok := w.pods[uid]
	if !ok {
		delete(w.pending, uid)
		w.updatePendingLocked()
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
	defer w.updatePendingLocked()
	if w.pods[uid] != e {
		return // forgotten while we wrote
	}
	ref := klog.KRef(snap.key.Namespace, snap.key.Name)
	switch res.outcome {
	case done:
		if w.outage.active() && res.err == nil {
			klog.InfoS("API server answers again; writing every pending pod", "pending", len(w.pending))
			w.outage.reset()
		}
		if res.written != nil {
			e.written, e.lastWrite = res.written, now
		}
		e.verify = false
		w.limiter.Forget(uid)
		if e.gen == snap.gen {
			delete(w.pending, uid)
		}
	case retry:
		if apiUnavailable(res.err) {
			// The pod stays due; the whole writer waits instead.
			delay := w.outage.fail(now)
			w.pending[uid] = time.Time{}
			klog.ErrorS(res.err, "API server unavailable; backing off every status write", "pod", ref, "retryIn", delay)
			return
		}
		delay := w.limiter.When(uid)
		w.pending[uid] = now.Add(delay)
		klog.ErrorS(res.err, "Failed to write pod status; will retry", "pod", ref, "podUID", uid, "retryIn", delay)
	case interrupted:
		w.pending[uid] = time.Time{}
	case drop:
		delete(w.pods, uid)
		delete(w.pending, uid)
		w.limiter.Forget(uid)
		klog.V(2).InfoS("Pod is gone; dropping its status", "pod", ref, "podUID", uid)
	}
}

// syncConditions is one sync in conditions mode.
func (w *Writer) syncConditions(ctx context.Context, e podEntry) syncResult {
	pod, ok := w.opts.Pods.Pod(e.key.UID)
	if !ok {
		return syncResult{outcome: drop}
	}
	// Compare with what probed last wrote, or with the cache when that is
	// unknown or the heartbeat saw drift. Keep lastTransitionTimes from
	// probed's own write when there is one: the cache may lag behind it.
	basis := OwnedConditions(pod.Status.Conditions)
	times := basis
	if e.written != nil {
		times = e.written.conditions
		if !e.verify {
			basis = e.written.conditions
		}
	}
	desired := Conditions(e.desired, times, w.now())
	if sameConditions(desired, basis) {
		return syncResult{outcome: done}
	}
	ref := klog.KRef(e.key.Namespace, e.key.Name)
	if w.opts.DryRun {
		w.opts.Metrics.write(OutcomeDryRun, -1)
		klog.V(2).InfoS("Dry run: would apply pod conditions", "pod", ref, "podUID", e.key.UID, "conditions", summarize(desired))
		return syncResult{outcome: done, written: &written{conditions: desired}}
	}

	reqCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	start := w.clock.Now()
	err := applyStatus(reqCtx, w.opts.Client, applyConfiguration(e.key, desired), FieldManager)
	if res, failed := w.classify(ctx, err, start, true); failed {
		return res
	}
	klog.V(2).InfoS("Applied pod conditions", "pod", ref, "podUID", e.key.UID, "conditions", summarize(desired))
	return syncResult{outcome: done, written: &written{conditions: desired}}
}

// syncContainerStatus is one sync in container-status mode.
func (w *Writer) syncContainerStatus(ctx context.Context, e podEntry) syncResult {
	cached, ok := w.opts.Pods.Pod(e.key.UID)
	if !ok {
		return syncResult{outcome: drop}
	}
	if len(e.desired.Containers) == 0 {
		return syncResult{outcome: done} // probed owns nothing on this pod
	}
	now := w.now()
	target := cached.DeepCopy()
	changed := setContainerStatus(target, e.desired, now)
	if e.written != nil && !e.verify {
		changed = !maps.Equal(flagsOf(target, e.desired), e.written.flags) ||
			!sameConditions(kubeletConditions(target), e.written.kubelet)
	}
	if !changed {
		return syncResult{outcome: done}
	}
	ref := klog.KRef(e.key.Namespace, e.key.Name)
	if w.opts.DryRun {
		w.opts.Metrics.write(OutcomeDryRun, -1)
		klog.V(2).InfoS("Dry run: would patch container status", "pod", ref, "podUID", e.key.UID,
			"containers", summarizeFlags(flagsOf(target, e.desired)), "conditions", summarize(kubeletConditions(target)))
		return syncResult{outcome: done, written: writtenFrom(target, e.desired)}
	}

	pods := w.opts.Client.CoreV1().Pods(e.key.Namespace)
	for attempt := 1; ; attempt++ {
		res, wrote, again := w.readModifyWrite(ctx, pods, e, now, attempt)
		if again {
			continue
		}
		if wrote {
			klog.V(2).InfoS("Patched container status", "pod", ref, "podUID", e.key.UID,
				"containers", summarizeFlags(res.written.flags), "conditions", summarize(res.written.kubelet))
		}
		return res
	}
}

// podsClient is the part of the typed pods client container-status mode uses.
type podsClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Pod, error)
}

// readModifyWrite reads the pod, applies the desired state and patches it
// with the resourceVersion it read. wrote reports a successful patch; again
// asks for another attempt at once, after a Conflict.
func (w *Writer) readModifyWrite(ctx context.Context, pods podsClient, e podEntry, now metav1.Time, attempt int) (res syncResult, wrote, again bool) {
	reqCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	start := w.clock.Now()
	fresh, err := pods.Get(reqCtx, e.key.Name, metav1.GetOptions{})
	if err == nil && fresh.UID != e.key.UID {
		err = apierrors.NewNotFound(v1.Resource("pods"), e.key.Name) // the name belongs to another pod now
	}
	if err != nil {
		res, _ := w.classify(ctx, err, start, false)
		return res, false, false
	}
	updated := fresh.DeepCopy()
	if !setContainerStatus(updated, e.desired, now) {
		// Already in place: our last write, or someone else's.
		return syncResult{outcome: done, written: writtenFrom(updated, e.desired)}, false, false
	}
	patch, err := statusPatch(fresh, updated)
	if err != nil {
		return syncResult{outcome: retry, err: fmt.Errorf("building status patch: %w", err)}, false, false
	}
	start = w.clock.Now()
	_, err = pods.Patch(reqCtx, e.key.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}, "status")
	if res, failed := w.classify(ctx, err, start, true); failed {
		if apierrors.IsConflict(err) && attempt < maxConflictAttempts && ctx.Err() == nil {
			klog.V(3).InfoS("Pod changed while writing its container status; reading it again",
				"pod", klog.KRef(e.key.Namespace, e.key.Name), "attempt", attempt)
			return res, false, true
		}
		return res, false, false
	}
	return syncResult{outcome: done, written: writtenFrom(updated, e.desired)}, true, false
}

// classify counts the outcome of one API request of a write (the write
// itself when timed, or the read before it) and says what to do next;
// failed is true when err is not nil.
func (w *Writer) classify(ctx context.Context, err error, start time.Time, timed bool) (res syncResult, failed bool) {
	seconds := -1.0
	if timed {
		seconds = w.clock.Since(start).Seconds()
	}
	switch {
	case err == nil:
		w.opts.Metrics.write(OutcomeSuccess, seconds)
		return syncResult{outcome: done}, false
	case ctx.Err() != nil:
		// Shutting down: not the API server's fault; the flush retries.
		return syncResult{outcome: interrupted, err: err}, true
	case apierrors.IsNotFound(err):
		w.opts.Metrics.write(OutcomeNotFound, seconds)
		return syncResult{outcome: drop, err: err}, true
	case apierrors.IsConflict(err):
		w.opts.Metrics.write(OutcomeConflict, seconds)
		return syncResult{outcome: retry, err: err}, true
	default:
		w.opts.Metrics.write(OutcomeError, seconds)
		return syncResult{outcome: retry, err: err}, true
	}
}

// resync is the heartbeat: it compares every settled pod's desired state with
// the informer cache and marks real differences pending, to be written again.
// A pod written less than one Resync ago is skipped: the cache may not have
// seen that write yet. Pods already pending are left to their own schedule.
func (w *Writer) resync() {
	defer w.heartbeats.Add(1)
	if w.opts.DryRun {
		return // nothing was written, so the cache cannot reflect it
	}
	now := w.clock.Now()
	w.mu.Lock()
	var candidates []podEntry
	for uid, e := range w.pods {
		if _, queued := w.pending[uid]; queued {
			continue
		}
		if !e.lastWrite.IsZero() && now.Sub(e.lastWrite) < w.opts.Resync {
			continue
		}
		candidates = append(candidates, *e)
	}
	w.mu.Unlock()

	for _, e := range candidates {
		pod, ok := w.opts.Pods.Pod(e.key.UID)
		if ok && !w.drifted(pod, e.desired) {
			continue
		}
		w.mu.Lock()
		if cur, found := w.pods[e.key.UID]; found && cur.gen == e.gen {
			if _, queued := w.pending[e.key.UID]; !queued {
				klog.V(2).InfoS("Pod status drifted from the desired state; writing it again", "pod", klog.KRef(e.key.Namespace, e.key.Name), "podUID", e.key.UID)
				cur.verify = true
				w.pending[e.key.UID] = time.Time{}
				w.updatePendingLocked()
			}
		}
		w.mu.Unlock()
	}
}

// drifted reports whether the pod, as the cache has it, differs from the
// desired state in a way worth a write.
func (w *Writer) drifted(pod *v1.Pod, desired PodState) bool {
	if w.opts.Mode == ModeContainerStatus {
		return len(desired.Containers) > 0 && setContainerStatus(pod.DeepCopy(), desired, w.now())
	}
	owned := OwnedConditions(pod.Status.Conditions)
	return !sameConditions(Conditions(desired, owned, w.now()), owned)
}

// flush makes one last attempt at every pending pod, ignoring backoff,
// within FlushTimeout.
func (w *Writer) flush(parent context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), w.opts.FlushTimeout)
	defer cancel()
	w.mu.Lock()
	uids := make([]types.UID, 0, len(w.pending))
	for uid := range w.pending {
		uids = append(uids, uid)
	}
	w.mu.Unlock()
	slices.Sort(uids)
	for _, uid := range uids {
		if ctx.Err() != nil {
			break
		}
		w.syncPod(ctx, uid)
	}
	w.mu.Lock()
	left := len(w.pending)
	w.mu.Unlock()
	if left > 0 {
		klog.InfoS("Status writer stopped with unwritten pod status", "pods", left)
	}
}

// now is the time stamped on a transition, at the API's one-second precision,
// so that what probed remembers equals what the API server stores.
func (w *Writer) now() metav1.Time {
	return metav1.NewTime(w.clock.Now()).Rfc3339Copy()
}

func writtenFrom(pod *v1.Pod, s PodState) *written {
	return &written{flags: flagsOf(pod, s), kubelet: kubeletConditions(pod)}
}

// summarize renders conditions for a log line: type=status/reason.
func summarize(conds []v1.PodCondition) []string {
	out := make([]string, 0, len(conds))
	for _, c := range conds {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return out
}

func summarizeFlags(flags map[string]containerFlags) []string {
	out := make([]string, 0, len(flags))
	for name, f := range flags {
		out = append(out, fmt.Sprintf("%s(ready=%t,started=%t)", name, f.ready, f.started))
	}
	slices.Sort(out)
	return out
}
