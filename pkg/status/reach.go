package status

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/kubeclient"
)

// ReachConditionType is probed's record of what a pod's probes ran, or
// where they connected, when probed first saw the pod: True, with reason
// ReachRecorded and the record (probespec.ReachRecord's format) as its
// message. probed holds probe edits to it while the probe-reach admission
// policy is not in force. It lives in the pod's status, which a user who
// may only patch the pod cannot write, so it survives a restart of probed.
const ReachConditionType v1.PodConditionType = "reach.probed.io"

// ReasonReachRecorded is the reach condition's reason.
const ReasonReachRecorded = "ReachRecorded"

// ReachFieldManager owns the reach condition, apart from the conditions
// the Writer applies, so that neither apply removes the other's.
const ReachFieldManager = "probed-reach"

// ReachRecord returns the record of the pod's reach condition, if it has
// a True one.
func ReachRecord(pod *v1.Pod) (string, bool) {
	c := findCondition(pod.Status.Conditions, ReachConditionType)
	if c == nil || c.Status != v1.ConditionTrue {
		return "", false
	}
	return c.Message, true
}

// ReachRecorder writes pods' reach conditions. Record never blocks; a
// loop applies the latest record of each pod, alone in its condition,
// and retries a failed write with backoff until it succeeds or the pod is
// forgotten.
type ReachRecorder struct {
	client kubeclient.Interface
	dryRun bool
	queue  workqueue.TypedRateLimitingInterface[types.UID]

	mu   sync.Mutex
	want map[types.UID]reachWrite
}

type reachWrite struct {
	key    PodKey
	record string
	since  metav1.Time
}

// NewReachRecorder returns a recorder writing with client; with dryRun it
// only logs.
func NewReachRecorder(client kubeclient.Interface, dryRun bool) *ReachRecorder {
	return &ReachRecorder{
		client: client,
		dryRun: dryRun,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](retryBaseDelay, retryMaxDelay),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "probed_reach_records"}),
		want: map[types.UID]reachWrite{},
	}
}

// Record asks for the pod's reach condition to hold record. since is the
// condition's lastTransitionTime as the pod has it (zero: now).
func (r *ReachRecorder) Record(key PodKey, record string, since metav1.Time) {
	r.mu.Lock()
	r.want[key.UID] = reachWrite{key: key, record: record, since: since}
	r.mu.Unlock()
	r.queue.Add(key.UID)
}

// Forget drops a pod that is gone.
func (r *ReachRecorder) Forget(uid types.UID) {
	r.mu.Lock()
	delete(r.want, uid)
	r.mu.Unlock()
	r.queue.Forget(uid)
}

// Run writes until ctx ends.
func (r *ReachRecorder) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for r.next(ctx) {
	}
}

func (r *ReachRecorder) next(ctx context.Context) bool {
	uid, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(uid)
	r.mu.Lock()
	w, ok := r.want[uid]
	r.mu.Unlock()
	if !ok {
		return true
	}
	err := r.write(ctx, w)
	switch {
	case err == nil:
		r.mu.Lock()
		if cur, ok := r.want[uid]; ok && cur == w {
			delete(r.want, uid)
		}
		r.mu.Unlock()
		r.queue.Forget(uid)
	case apierrors.IsNotFound(err) || ctx.Err() != nil:
		r.Forget(uid)
	default:
		klog.ErrorS(err, "Failed to record a pod's probe reach; will retry", "pod", klog.KRef(w.key.Namespace, w.key.Name), "podUID", uid)
		r.queue.AddRateLimited(uid)
	}
	return true
}

// write applies the one condition, as its own field manager, with the
// pod's UID as a precondition.
func (r *ReachRecorder) write(ctx context.Context, w reachWrite) error {
	since := w.since
	if since.IsZero() {
		since = metav1.NewTime(time.Now()).Rfc3339Copy()
	}
	ref := klog.KRef(w.key.Namespace, w.key.Name)
	if r.dryRun {
		klog.V(2).InfoS("Dry run: would record the pod's probe reach", "pod", ref, "record", w.record)
		return nil
	}
	pod := applyConfiguration(w.key, []v1.PodCondition{{Type: ReachConditionType, Status: v1.ConditionTrue,
		Reason: ReasonReachRecorded, Message: w.record, LastTransitionTime: since}})
	reqCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if err := applyStatus(reqCtx, r.client, pod, ReachFieldManager); err != nil {
		return err
	}
	klog.V(2).InfoS("Recorded the pod's probe reach", "pod", ref, "record", w.record)
	return nil
}
