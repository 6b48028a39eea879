package manager

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/status"
)

// ReachPolicy says whether the probe-reach admission policy is known to be
// in force (reachpolicy.Checker).
type ReachPolicy interface {
	// Known reports whether the policy has been judged at all.
	Known() bool
	// InForce reports whether it is known to be in force, and if not, why.
	InForce() (bool, string)
}

// ReachRecorder keeps a pod's reach record in its status, where a user
// who may only patch the pod cannot change it (status.ReachRecorder).
type ReachRecorder interface {
	Record(key status.PodKey, record string, since metav1.Time)
	Forget(uid types.UID)
}

// heldReach is what probed recorded of one pod's probes' reach.
type heldReach struct {
	uid    types.UID
	record probespec.ReachRecord
	// written is the record last handed to the ReachRecorder, or read
	// from the pod's status; "" when there is none.
	written string
}

// holdReach holds a pod's probes to the reach probed recorded when it
// first saw the pod, whenever the probe-reach admission policy is not known
// to be in force (contract §1, "What an edit may not do": the daemon
// enforces it itself).
//
// Without the policy, nothing in the pod object tells an edit by a user
// allowed to create pods/exec from one by a user who may only patch the
// pod: probed.io/approved-reach is then anyone's to write, and a pod
// without it takes any edit. So probed records, per probe slot, the reach
// it first saw (all declares every probe of the annotation; approved those
// that probed.io/approved-reach let through, whose reach alone is recorded),
// keeps the record in the pod's status (reach.probed.io), which survives a
// restart of probed and which a user who may only patch the pod cannot
// write, and refuses a probe whose reach is not the recorded one. While the
// policy is in force the record follows the pod: the policy then lets
// only users allowed to create pods/exec change what it admits.
//
// It returns the probes that may run, the problems with one more per
// refused probe, and how many it refused.
func (m *Manager) holdReach(key string, pod *v1.Pod, all, approved []probespec.DeclaredProbe, problems []probespec.ProbeProblem) ([]probespec.DeclaredProbe, []probespec.ProbeProblem, int) {
	current, err := probespec.PodReach(pod)
	if err != nil {
		current = probespec.ReachRecord{} // declares nothing to run
	}
	refused := map[string]bool{}
	for _, d := range all {
		if d.FromAnnotation {
			refused[probespec.ReachKey(d)] = true
		}
	}
	for _, d := range approved {
		delete(refused, probespec.ReachKey(d))
	}
	inForce, why := m.reachPolicyInForce()

	m.mu.Lock()
	h := m.held[key]
	first := h == nil || h.uid != pod.UID
	if first {
		h = &heldReach{uid: pod.UID, record: probespec.ReachRecord{}}
		if v, ok := status.ReachRecord(pod); ok {
			if r, err := probespec.ParseReachRecord(v); err == nil {
				h.record, h.written = r, v
			}
		}
		m.held[key] = h
	}
	if (first && h.written == "") || inForce {
		for k, d := range current {
			if !refused[k] {
				h.record[k] = d
			}
		}
	}
	record := h.record.String()
	write := m.opts.ReachRecorder != nil && record != h.written && (!inForce || pod.Annotations[probespec.ProbesAnnotation] != "")
	if write {
		h.written = record
	}
	held := h.record // only this goroutine, the sync loop, changes it
	m.mu.Unlock()

	kept := approved
	if !inForce {
		kept, problems = probespec.HoldReach(pod, approved, problems, held, why)
	}

	if write {
		var since metav1.Time
		if c := reachCondition(pod); c != nil {
			since = c.LastTransitionTime
		}
		m.opts.ReachRecorder.Record(status.PodKey{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, record, since)
	}
	return kept, problems, len(approved) - len(kept)
}

// reachPolicyInForce asks the ReachPolicy; without one, it is never known
// to be in force.
func (m *Manager) reachPolicyInForce() (bool, string) {
	if m.opts.ReachPolicy == nil {
		return false, "probed does not check it: --probe-reach-policy is empty"
	}
	return m.opts.ReachPolicy.InForce()
}

// forgetHeldLocked drops the record of the pod at key unless it is uid's.
func (m *Manager) forgetHeldLocked(key string, keep types.UID) {
	h := m.held[key]
	if h == nil || h.uid == keep {
		return
	}
	delete(m.held, key)
	if m.opts.ReachRecorder != nil {
		m.opts.ReachRecorder.Forget(h.uid)
	}
}

// ResyncAll syncs every pod of the node again: the probe-reach policy's
// state changed, which changes what may run.
func (m *Manager) ResyncAll() {
	for _, key := range m.indexer.ListKeys() {
		m.queue.Add(key)
	}
}

func reachCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == status.ReachConditionType {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
