package kill

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/probespec"
)

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

// isOwnerMismatch reports whether err says the runtime's container is not
// the pod's (cri.OwnerMismatchError).
func isOwnerMismatch(err error) bool {
	var m interface{ OwnerMismatch() bool }
	return errors.As(err, &m) && m.OwnerMismatch()
}
