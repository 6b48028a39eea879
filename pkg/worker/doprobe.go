package worker

import (
	"context"
	"fmt"
	"runtime/debug"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/results"
)

// doProbe probes the container once and records the result. It returns
// whether the worker should go on. The order of checks is the kubelet's.
func (w *Worker) doProbe(ctx context.Context) (keepGoing bool) {
	defer w.publish()
	// A panic must not end the worker nor go unnoticed: log it, count it,
	// keep going (the kubelet keeps going too, but says less).
	defer func() {
		if r := recover(); r != nil {
			w.cfg.Metrics.countPanic(w.series)
			klog.ErrorS(fmt.Errorf("panic: %v", r), "Probe worker recovered from a panic",
				w.logKV("stack", string(debug.Stack()))...)
			w.record(HistoryEntry{Time: w.clock.Now(), Result: "error", Error: fmt.Sprintf("panic: %v", r)})
			keepGoing = true
		}
	}()

	pod, ok := w.cfg.Pods.Pod(w.cfg.PodUID)
	if !ok || pod == nil {
		// Either the pod is not in the cache yet, or it was already deleted.
		klog.V(3).InfoS("No pod in the cache", w.logKV()...)
		w.state = StateContainerNotRunning
		return true
	}

	if pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded {
		klog.V(3).InfoS("Pod is terminated, exiting probe worker", w.logKV("phase", pod.Status.Phase)...)
		w.state = StateStopped
		return false
	}

	cs, ok := containerStatus(pod, w.cfg.Container.Name)
	if !ok {
		// Either the container has not been created yet, or it was deleted.
		klog.V(3).InfoS("Probe target container not found", w.logKV()...)
		w.state = StateContainerNotRunning
		return true
	}

	if w.containerID != cs.ContainerID {
		w.newInstance(pod, cs.ContainerID)
	}

	if w.onHold {
		// On hold until a new container instance appears.
		w.state = StateOnHold
		if w.killPending && cs.State.Running != nil {
			if pod.DeletionTimestamp != nil {
				// The pod is being stopped anyway: a deferred or failed kill
				// retried now would restart a container mid-shutdown.
				w.killPending = false
			} else {
				w.kill(ctx, pod)
			}
		}
		return true
	}

	if cs.State.Running == nil {
		klog.V(3).InfoS("Non-running container probed", w.logKV()...)
		w.state = StateContainerNotRunning
		if w.containerID != "" {
			w.cfg.Results.Set(w.containerID, results.Failure, pod)
		}
		// Go on unless the container will not be restarted. As in the kubelet
		// (without the alpha ContainerRestartRules gate) only restartPolicy
		// Never ends a regular container; OnFailure keeps the worker even
		// after exit 0, until the pod phase ends it.
		if cs.State.Terminated == nil ||
			pod.Spec.RestartPolicy != v1.RestartPolicyNever ||
			isRestartableInit(pod, w.cfg.Container.Name) {
			return true
		}
		w.state = StateStopped
		return false
	}

	// Graceful shutdown of the pod: liveness and startup must not kill a
	// container that is being stopped anyway. Readiness goes on.
	if pod.DeletionTimestamp != nil && (w.cfg.ProbeType == prober.Liveness || w.cfg.ProbeType == prober.Startup) {
		klog.V(3).InfoS("Pod deletion requested, setting probe result to success", w.logKV()...)
		if w.cfg.ProbeType == prober.Startup {
			klog.InfoS("Pod deletion requested before container has fully started", w.logKV()...)
		}
		w.cfg.Results.Set(w.containerID, results.Success, pod)
		w.state = StateStopped
		return false
	}

	// Probe disabled for initialDelaySeconds after the container started.
	// Whole seconds, truncated, as the kubelet compares them (in 64 bits, so a
	// missing start time cannot overflow into "not yet").
	elapsed := w.clock.Since(cs.State.Running.StartedAt.Time)
	if int64(elapsed.Seconds()) < int64(w.cfg.Spec.InitialDelaySeconds) {
		w.state = StateInitialDelay
		return true
	}

	if w.isStarted(pod, cs) {
		// A started container needs no startup probe; the worker stays for the
		// next instance.
		if w.cfg.ProbeType == prober.Startup {
			w.state = StateOnHold
			return true
		}
	} else if w.cfg.ProbeType != prober.Startup {
		// Liveness and readiness wait for the container to start.
		w.state = StateWaitingForStartup
		return true
	}

	w.state = StateRunning
	w.publish() // a slow probe shows as running while in flight
	result, ok := w.probe(ctx, pod, cs)
	if !ok {
		// Prober error: throw the result away.
		return true
	}

	if w.counted && w.lastResult == result {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun, w.counted = result, 1, true
	}

	if (result == results.Failure && w.resultRun < int(w.cfg.Spec.FailureThreshold)) ||
		(result == results.Success && w.resultRun < int(w.cfg.Spec.SuccessThreshold)) {
		// Below threshold: leave the published result unchanged.
		return true
	}

	w.cfg.Results.Set(w.containerID, result, pod)

	// A liveness failure means a restart: stop probing until a new container
	// appears (probing a container being stopped can corrupt it, kubernetes
	// #21751). A startup probe holds on any result at its threshold, so it
	// does not run again for this instance (kubernetes #117153).
	if (w.cfg.ProbeType == prober.Liveness && result == results.Failure) || w.cfg.ProbeType == prober.Startup {
		w.onHold = true
		w.resultRun = 0
		w.state = StateOnHold
		if result == results.Failure {
			w.kill(ctx, pod)
		}
	}
	return true
}

// newInstance switches the worker to a new container ID: forget the old
// result, publish the initial one (or the seed, for the first instance), and
// lift the hold.
func (w *Worker) newInstance(pod *v1.Pod, id string) {
	first := w.containerID == ""
	if !first {
		w.cfg.Results.Remove(w.containerID)
	}
	w.containerID = id
	initial := w.initial
	if first && w.cfg.InitialResult != nil {
		if seed, ok := w.cfg.InitialResult(id); ok {
			initial = seed
			klog.V(3).InfoS("Seeding probe result for a container seen before a restart", w.logKV("containerID", id, "result", seed)...)
		}
	}
	w.cfg.Results.Set(id, initial, pod)
	w.onHold = false
	w.killPending = false
}

// probe runs the prober once, records history and metrics, and reports
// whether the result counts (false when the prober returned an error).
func (w *Worker) probe(ctx context.Context, pod *v1.Pod, cs *v1.ContainerStatus) (results.Result, bool) {
	target := prober.Target{
		PodIP:       pod.Status.PodIP,
		ContainerID: cs.ContainerID,
		Ports:       w.cfg.Container.Ports,
		Env:         w.cfg.Container.Env,
	}
	events := containerEvents{rec: w.cfg.Recorder, pod: pod, container: w.cfg.Container.Name}

	start := w.clock.Now()
	result, output, err := w.cfg.Prober.Probe(ctx, w.cfg.ProbeType, w.cfg.Spec, target, events)
	took := w.clock.Since(start)

	entry := HistoryEntry{Time: start, Result: resultWord(result), Duration: took, Output: excerpt(output)}
	if err != nil {
		entry.Result, entry.Error = "error", excerpt(err.Error())
		w.record(entry)
		klog.V(1).InfoS("Probe errored; result discarded", w.logKV("err", err)...)
		return result, false
	}
	w.record(entry)
	w.cfg.Metrics.observeProbe(w.series, result, took.Seconds())
	return result, true
}

// kill stops the container through the Killer. Failures are logged, counted
// and retried on a later step while this instance still runs.
func (w *Worker) kill(ctx context.Context, pod *v1.Pod) {
	if w.cfg.Killer == nil {
		return
	}
	err := w.cfg.Killer.Kill(ctx, pod, &w.cfg.Container, w.containerID, w.cfg.ProbeType, w.cfg.Spec)
	if err != nil {
		w.killPending = true
		w.cfg.Metrics.countKill(w.series, KillOutcomeError)
		klog.ErrorS(err, "Failed to stop container after probe failure; will retry", w.logKV("containerID", w.containerID)...)
		return
	}
	w.killPending = false
	w.cfg.Metrics.countKill(w.series, KillOutcomeSuccess)
	klog.InfoS("Stopped container after probe failure", w.logKV("containerID", w.containerID)...)
}

// isStarted is probed's notion of "started" for this container instance.
func (w *Worker) isStarted(pod *v1.Pod, cs *v1.ContainerStatus) bool {
	if w.cfg.Started != nil {
		return w.cfg.Started(pod, cs)
	}
	return cs.Started != nil && *cs.Started
}

// containerStatus finds the named container among the regular, then the
// init container statuses, skipping one without a container ID, as the
// kubelet does.
func containerStatus(pod *v1.Pod, name string) (*v1.ContainerStatus, bool) {
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name && list[i].ContainerID != "" {
				return &list[i], true
			}
		}
	}
	return nil, false
}
