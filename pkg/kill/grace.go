package kill

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/restartpolicy"
)

// MinimumGracePeriod is the least time a stopped container gets between the
// stop signal and SIGKILL, even when its preStop hook used up the grace
// period or the grace period is 0 (the kubelet's minimumGracePeriodInSeconds).
const MinimumGracePeriod = 2 * time.Second

// GracePeriod is the time a container failing its liveness or startup probe
// gets to end, its preStop hook included: the first that is set of the
// pod's deletionGracePeriodSeconds, the probe's
// terminationGracePeriodSeconds, the pod's terminationGracePeriodSeconds,
// else the kubelet's minimum of 2 s (contract §3; setTerminationGracePeriod
// starts from minimumGracePeriodInSeconds). The API server always sets the
// pod's, so the last case is for pods that never went through it.
// RuntimeKiller stops the container with what the hook left of it, and
// never with less than MinimumGracePeriod.
//
// The probe's is left aside when the kubelet's own kill would have been a
// kill of the whole pod (restartpolicy.KillsPod: the pod's last running
// container, which will not be restarted): the kubelet then stops its
// containers with the pod's grace period, and the exit code, which a
// Job's podFailurePolicy may read, is the one the pod's allows.
func GracePeriod(pod *v1.Pod, container string, spec *v1.Probe) time.Duration {
	if restartpolicy.KillsPod(pod, container) {
		spec = nil
	}
	switch {
	case pod != nil && pod.DeletionGracePeriodSeconds != nil:
		return seconds(*pod.DeletionGracePeriodSeconds)
	case spec != nil && spec.TerminationGracePeriodSeconds != nil:
		return seconds(*spec.TerminationGracePeriodSeconds)
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		return seconds(*pod.Spec.TerminationGracePeriodSeconds)
	}
	return MinimumGracePeriod
}

func seconds(s int64) time.Duration {
	if s < 0 {
		s = 0
	}
	return time.Duration(s) * time.Second
}
