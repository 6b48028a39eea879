package lifecycle

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/prober"
)

// Recorder emits an Event about a pod; an empty container name addresses
// the pod itself. It has the shape of worker.Recorder.
type Recorder interface {
	Event(pod *v1.Pod, containerName string, eventType, reason, message string)
}

// Options configures a Runner. The zero value is valid.
type Options struct {
	// UserAgent is the version httpGet hooks send, as
	// "kube-lifecycle/<major>.<minor>", as the kubelet does; read at each
	// hook. Nil means prober.DefaultUserAgentVersion.
	UserAgent *prober.UserAgent
	// HostGuard applies --probe-host-policy to every connection of an
	// httpGet hook. Nil checks nothing, as the kubelet does.
	HostGuard *hostpolicy.Guard
	// Recorder receives the LifecycleHTTPFallback event; nil emits none.
	Recorder Recorder
	// Clock times sleep hooks; the real clock when nil.
	Clock clock.Clock
}

// Runner runs lifecycle hooks. It is safe for concurrent use.
type Runner struct {
	exec      prober.CommandRunner
	userAgent *prober.UserAgent
	guard     *hostpolicy.Guard
	recorder  Recorder
	clock     clock.Clock
}

// New returns a Runner whose exec hooks run through exec (probed's
// container runtime, the same one exec probes use); exec may be nil when
// no exec hook will run, and such a hook then fails.
func New(exec prober.CommandRunner, o Options) *Runner {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Runner{exec: exec, userAgent: o.UserAgent, guard: o.HostGuard, recorder: o.Recorder, clock: o.Clock}
}

// HookError is a hook that failed. Its text is the kubelet's message for
// the failure, which names the hook, the container and the pod; Err is the
// cause.
type HookError struct {
	Message string
	Err     error
}

func (e *HookError) Error() string { return e.Message }
func (e *HookError) Unwrap() error { return e.Err }

// Run runs handler, one of container's hooks, once. containerID is
// runtime-qualified ("containerd://<id>"). A nil error means the hook
// succeeded; an httpGet hook succeeds on any HTTP response, whatever its
// status, as in the kubelet.
func (r *Runner) Run(ctx context.Context, pod *v1.Pod, container *v1.Container, containerID string, handler *v1.LifecycleHandler) error {
	var msg string
	var err error
	switch {
	case handler == nil:
		err = fmt.Errorf("invalid handler: %v", handler)
		msg = fmt.Sprintf("Cannot run handler: %v", err)
	case handler.Exec != nil:
		var output []byte
		output, err = r.runExec(ctx, containerID, handler.Exec.Command)
		if err != nil {
			msg = fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				handler.Exec.Command, container.Name, podDesc(pod), err, string(output))
		}
	case handler.HTTPGet != nil:
		err = r.runHTTPGet(ctx, pod, container, handler.HTTPGet)
		if err != nil {
			msg = fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				handler.HTTPGet.Path, container.Name, podDesc(pod), err)
		}
	case handler.Sleep != nil:
		err = r.runSleep(ctx, handler.Sleep.Seconds)
		if err != nil {
			msg = fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v",
				handler.Sleep.Seconds, container.Name, podDesc(pod), err)
		}
	default:
		// tcpSocket is accepted by the API for compatibility but never run.
		err = fmt.Errorf("invalid handler: %v", handler)
		msg = fmt.Sprintf("Cannot run handler: %v", err)
	}
	if err != nil {
		klog.V(1).InfoS("Lifecycle hook failed", "pod", klog.KObj(pod), "podUID", pod.UID,
			"containerName", container.Name, "containerID", containerID, "err", err)
		return &HookError{Message: msg, Err: err}
	}
	return nil
}

// podDesc is the kubelet's format.Pod: name_namespace(uid).
func podDesc(pod *v1.Pod) string {
	if pod == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// sleepTerminated is the kubelet's error for a sleep hook cut short.
const sleepTerminated = "container terminated before sleep hook finished"

// runSleep waits seconds, or until ctx ends (the container was stopped).
func (r *Runner) runSleep(ctx context.Context, seconds int64) error {
	if seconds <= 0 {
		return nil // sleep 0 is valid (PodLifecycleSleepActionAllowZero)
	}
	t := r.clock.NewTimer(time.Duration(seconds) * time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%s", sleepTerminated)
	case <-t.C():
		return nil
	}
}
