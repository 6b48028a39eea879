package kill

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ReasonFailedPreStopHook is the kubelet's Warning event for a preStop hook
// that failed; its message is always "PreStopHook failed", because the
// handler's own message (in the log) may quote secrets.
const ReasonFailedPreStopHook = "FailedPreStopHook"

// preStopOf returns the container's preStop hook, or nil.
func preStopOf(c *v1.Container) *v1.LifecycleHandler {
	if c == nil || c.Lifecycle == nil {
		return nil
	}
	return c.Lifecycle.PreStop
}

// runningHook is a preStop hook started in the background.
type runningHook struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startPreStop runs the hook in its own goroutine. A failure emits the
// Warning FailedPreStopHook, as the kubelet's does, when it happens: before
// the stop if the hook failed within the grace period, after it if the hook
// was still running and ended with its container. Nothing is reported when
// ctx ends, which means the kill itself was abandoned.
func (k *RuntimeKiller) startPreStop(ctx context.Context, pod *v1.Pod, container *v1.Container, containerID string, hook *v1.LifecycleHandler) *runningHook {
	klog.V(3).InfoS("Running preStop hook", "pod", klog.KObj(pod), "podUID", pod.UID, "containerName", container.Name, "containerID", containerID)
	hctx, cancel := context.WithCancel(ctx)
	h := &runningHook{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		// A hook runner's bug must not take the daemon down with it.
		defer func() {
			if r := recover(); r != nil {
				klog.ErrorS(fmt.Errorf("panic: %v", r), "PreStop hook runner panicked", "pod", klog.KObj(pod), "containerName", container.Name)
			}
		}()
		err := k.Hooks.Run(hctx, pod, container, containerID, hook)
		if err == nil || ctx.Err() != nil {
			return
		}
		klog.ErrorS(err, "PreStop hook failed", "pod", klog.KObj(pod), "podUID", pod.UID,
			"containerName", container.Name, "containerID", containerID)
		if k.Recorder != nil {
			k.Recorder.Event(pod, container.Name, v1.EventTypeWarning, ReasonFailedPreStopHook, "PreStopHook failed")
		}
	}()
	return h
}

// wait waits for the hook to finish, at most grace, and returns the time it
// waited in whole seconds (the kubelet subtracts it from the grace period
// so) and whether the hook finished. It returns ctx's error if ctx ends first.
func (h *runningHook) wait(ctx context.Context, clk clock.Clock, grace time.Duration) (time.Duration, bool, error) {
	start := clk.Now()
	deadline := clk.NewTimer(grace)
	defer deadline.Stop()
	finished := false
	select {
	case <-h.done:
		finished = true
	case <-deadline.C():
	case <-ctx.Done():
	}
	// ctx's end also ends the hook, so both may be ready: abandon either way.
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	return clk.Since(start).Truncate(time.Second), finished, nil
}

// end cancels the hook if it still runs and waits for its goroutine, so that
// nothing outlives the kill: once the container is stopped a hook has
// nothing left to act on.
func (h *runningHook) end() {
	h.cancel()
	<-h.done
}

func (k *RuntimeKiller) clock() clock.Clock {
	if k.Clock == nil {
		return clock.RealClock{}
	}
	return k.Clock
}
