package kill

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/restartpolicy"
)

// KillMessage is the Killing event text for a probe failure of the named
// container, in the kubelet's words (kuberuntime computePodActions and
// computeInitContainerActions) where what follows probed's stop is what
// follows the kubelet's own kill (restartpolicy.KillParity):
//   - "Container <c> failed liveness probe, will be restarted" (or startup)
//     when the kubelet would restart it in the same pass;
//   - without ", will be restarted" when it would not (its restartPolicy,
//     or the pod's, is Never): what happens then depends on its exit code,
//     after probed's stop as after the kubelet's;
//   - "Init container <c> failed liveness probe" for a restartable init
//     container (sidecar), which the kubelet words this way.
//
// Where the two differ, the text says what probed's stop really leads to:
// under restartPolicy OnFailure (the pod's or the container's) the kubelet
// restarts a container after its own kill whatever the exit code, but after
// probed's stop only if the exit code is not 0, so the text ends in ", will
// be restarted unless it exits with code 0".
//
// When the kubelet's own kill would have been a kill of the whole pod
// (restartpolicy.KillsPod), the text is its killPodWithSyncResult's:
// "Stopping container <c>". The kubelet then stops the pod's remaining
// containers (its sidecars) itself, as it would have in the same pass.
func KillMessage(pod *v1.Pod, containerName string, probeType probespec.ProbeType) string {
	what := strings.ToLower(probeType.String())
	if pod != nil && restartpolicy.IsSidecar(&pod.Spec, containerName) {
		return fmt.Sprintf("Init container %s failed %s probe", containerName, what)
	}
	if restartpolicy.KillsPod(pod, containerName) {
		return "Stopping container " + containerName
	}
	msg := fmt.Sprintf("Container %s failed %s probe", containerName, what)
	if pod == nil {
		return msg + ", will be restarted"
	}
	c := restartpolicy.Container(&pod.Spec, containerName)
	if !restartpolicy.AfterKubeletKill(&pod.Spec, c) {
		return msg
	}
	switch after := restartpolicy.StopOutcome(&pod.Spec, c); {
	case after.All:
		return msg + ", will be restarted"
	case after.AllButZero:
		return msg + ", will be restarted unless it exits with code 0"
	case after.None:
		return msg + ", will not be restarted"
	}
	return msg + ", will be restarted or not by its exit code"
}
