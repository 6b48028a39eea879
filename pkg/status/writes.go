package status

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// This file is one sync of one pod: what to write, the API requests, and
// what their errors mean. writer.go decides when.

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
