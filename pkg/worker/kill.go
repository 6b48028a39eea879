package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/restartpolicy"
)

// GracePeriod is the time a container failing its liveness or startup probe
// gets to end, its preStop hook included: the first that is set of the
// pod's deletionGracePeriodSeconds, the probe's
// terminationGracePeriodSeconds, the pod's terminationGracePeriodSeconds,
// else the kubelet's minimum of 2 s (contract §3; setTerminationGracePeriod
// starts from minimumGracePeriodInSeconds). The API server always sets the
// pod's, so the last case is for pods that never went through it. RuntimeKiller stops the container with what the
// hook left of it, and never with less than MinimumGracePeriod.
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

// Stopper stops a container through the runtime; cri.Runtime satisfies it.
type Stopper interface {
	StopContainer(ctx context.Context, containerID string, grace time.Duration) error
}

// RuntimeKiller is the Killer probed uses, in the steps of the kubelet's
// killContainer:
//  1. a Normal "Killing" event with the kubelet's text;
//  2. the container's preStop hook, if it has one and GracePeriod is above
//     0, waited for at most the grace period, which then loses the whole
//     seconds the hook took (a failure is a Warning FailedPreStopHook and
//     does not stop the kill);
//  3. a runtime stop with what is left of the grace period, but at least
//     MinimumGracePeriod: the stop signal, then SIGKILL when it ends.
//
// The kubelet restarts the container afterwards according to restartPolicy.
type RuntimeKiller struct {
	// Runtime stops the container. Container IDs are passed through as-is
	// ("containerd://<id>").
	Runtime Stopper
	// Hooks runs the preStop hook; nil runs none.
	Hooks HookRunner
	// Recorder receives the Killing and FailedPreStopHook events; nil emits none.
	Recorder Recorder
	// EventOnly emits the Killing event but runs no hook and stops nothing.
	EventOnly bool
	// Clock times the preStop hook; the real clock when nil.
	Clock clock.Clock
}

var _ Killer = (*RuntimeKiller)(nil)

// ReasonContainerMismatch is the Warning event of a kill refused because
// the container ID in the pod's status is not the pod's container on the
// runtime.
const ReasonContainerMismatch = "ContainerMismatch"

// OwnerChecker is a Stopper that can tell, before a kill, whether the
// container is the caller's (cri.Limited and cri.Verified).
type OwnerChecker interface {
	CheckOwner(ctx context.Context, containerID string) error
}

// Kill implements Killer. A container the runtime no longer knows counts
// as stopped, after the Killing event (and the preStop hook), as in the
// kubelet's killContainer, which treats StopContainer's NotFound as done:
// a container often exits on its own as its probe fails, and retrying its
// stop would only spend the restart budget.
func (k *RuntimeKiller) Kill(ctx context.Context, pod *v1.Pod, container *v1.Container, containerID string, probeType probespec.ProbeType, spec *v1.Probe) error {
	if err := k.checkOwner(ctx, pod, container, containerID); err != nil {
		return err
	}
	if k.Recorder != nil {
		k.Recorder.Event(pod, container.Name, v1.EventTypeNormal, "Killing", KillMessage(pod, container.Name, probeType))
	}
	if k.EventOnly {
		return nil
	}
	if k.Runtime == nil {
		return fmt.Errorf("no runtime to stop container %q", containerID)
	}
	grace := GracePeriod(pod, container.Name, spec)
	if hook := preStopOf(container); hook != nil && grace > 0 && k.Hooks != nil {
		h := k.startPreStop(ctx, pod, container, containerID, hook)
		// After the stop: a hook still running ends with its container.
		defer h.end()
		took, finished, err := h.wait(ctx, k.clock(), grace)
		if err != nil {
			return fmt.Errorf("stop container %q: waiting for its preStop hook: %w", containerID, err)
		}
		klog.V(2).InfoS("PreStop hook done", "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container.Name,
			"containerID", containerID, "completed", finished, "took", took, "gracePeriod", grace)
		grace -= took
	}
	if grace < MinimumGracePeriod {
		grace = MinimumGracePeriod
	}
	klog.V(2).InfoS("Stopping container after probe failure", "pod", klog.KObj(pod), "podUID", pod.UID,
		"containerName", container.Name, "containerID", containerID, "probeType", probeType, "gracePeriod", grace)
	if err := k.Runtime.StopContainer(ctx, containerID, grace); err != nil {
		if errors.Is(err, cri.ErrContainerNotFound) {
			klog.V(2).InfoS("Container already gone; nothing to stop", "pod", klog.KObj(pod), "podUID", pod.UID,
				"containerName", container.Name, "containerID", containerID, "err", err)
			return nil
		}
		k.mismatchEvent(pod, container, err)
		return fmt.Errorf("stop container %q: %w", containerID, err)
	}
	return nil
}

// checkOwner refuses, before the Killing event and the preStop hook, a kill
// of a container that is not the pod's on the runtime. A container the
// runtime does not know is no one's: that is not a refusal, and its stop
// says so in turn.
func (k *RuntimeKiller) checkOwner(ctx context.Context, pod *v1.Pod, container *v1.Container, containerID string) error {
	c, ok := k.Runtime.(OwnerChecker)
	if k.EventOnly || !ok {
		return nil
	}
	if err := c.CheckOwner(ctx, containerID); err != nil && !errors.Is(err, cri.ErrContainerNotFound) {
		k.mismatchEvent(pod, container, err)
		return fmt.Errorf("stop container %q: %w", containerID, err)
	}
	return nil
}

// mismatchEvent tells the pod's owner that a kill was refused because its
// status names a container that is not its own.
func (k *RuntimeKiller) mismatchEvent(pod *v1.Pod, container *v1.Container, err error) {
	if k.Recorder != nil && isOwnerMismatch(err) {
		k.Recorder.Event(pod, container.Name, v1.EventTypeWarning, ReasonContainerMismatch, err.Error())
	}
}

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
