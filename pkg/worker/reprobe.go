package worker

import (
	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/kill"
	"github.com/probed-dev/probed/pkg/results"
)

// probeAgain starts the probing of this container instance over when the
// Killer cancelled the kill for good (kill.DeferredError.Reprobe: the
// workload guard): the hold is lifted, the result goes back to the initial
// value and failures are counted afresh from the next period, so that the
// container is restarted only if it still fails failureThreshold probes
// once the pause is over, never in a loop.
func (w *Worker) probeAgain(pod *v1.Pod, err error) {
	if d, ok := kill.AsDeferred(err); !ok || !d.Reprobe {
		return
	}
	w.vlog(2, "Restart cancelled by the restart guard; probing the container afresh", "containerID", w.containerID)
	w.cfg.Results.Set(w.containerID, results.Value{Result: w.initial}, pod)
	w.decided = w.initial
	w.onHold, w.killPending = false, false
	w.counted, w.resultRun = false, 0
	w.state = StateRunning
}
