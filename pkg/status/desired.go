package status

import "slices"

// DesiredPod is one pod's desired state, as the writer holds it.
type DesiredPod struct {
	Key   PodKey
	State PodState
}

// Desired returns a copy of every pod's desired state: what probed writes,
// or with DryRun what it would have written (shadow mode compares it with
// the kubelet's own status).
func (w *Writer) Desired() []DesiredPod {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]DesiredPod, 0, len(w.pods))
	for _, e := range w.pods {
		out = append(out, DesiredPod{Key: e.key, State: PodState{Containers: slices.Clone(e.desired.Containers)}})
	}
	return out
}
