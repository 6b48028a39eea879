package status

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

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
	for _, e := range w.pods {
		if e.pending {
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
		if cur, found := w.pods[e.key.UID]; found && cur.gen == e.gen && !cur.pending {
			klog.V(2).InfoS("Pod status drifted from the desired state; writing it again", "pod", klog.KRef(e.key.Namespace, e.key.Name), "podUID", e.key.UID)
			cur.verify = true
			w.markLocked(cur)
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
