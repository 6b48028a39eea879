package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/containerstatus"
	"github.com/probed-dev/probed/pkg/netns"
	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/restartpolicy"
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
			w.cfg.Metrics.countPanic(&w.series)
			msg := fmt.Sprintf("panic: %v", r)
			klog.ErrorS(errors.New(msg), "Probe worker recovered from a panic",
				w.logKV("stack", string(debug.Stack()))...)
			w.record(w.cfg.Clock.Now(), results.Unknown, 0, "", true, excerpt(msg))
			keepGoing = true
		}
	}()

	pod, cs, next := w.lookup()
	if next == stepProbe {
		if w.containerID != cs.ContainerID {
			w.newInstance(pod, cs.ContainerID)
		}
		next = w.gate(ctx, pod, cs)
	}
	if next != stepProbe {
		return next == stepSkip
	}
	return w.probeAndCount(ctx, pod, cs)
}

// What lookup and gate decided.
const (
	stepStop  = iota // the worker ends
	stepSkip         // nothing to probe on this step
	stepProbe        // probe pod's container cs
)

// lookup finds the pod and the container's status, as the kubelet's first
// checks do.
func (w *Worker) lookup() (*v1.Pod, *v1.ContainerStatus, int) {
	pod, ok := w.cfg.Pods.Pod(w.cfg.PodUID)
	if !ok || pod == nil {
		// Either the pod is not in the cache yet, or it was already deleted.
		w.vlog(3, "No pod in the cache")
		w.state = StateContainerNotRunning
		return nil, nil, stepSkip
	}

	if pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded {
		if klog.V(3).Enabled() {
			w.vlog(3, "Pod is terminated, exiting probe worker", "phase", pod.Status.Phase)
		}
		w.state = StateStopped
		return nil, nil, stepStop
	}

	cs := containerstatus.FindCreated(pod, w.cfg.Container.Name)
	if cs == nil {
		// Either the container has not been created yet, or it was deleted.
		w.vlog(3, "Probe target container not found")
		w.state = StateContainerNotRunning
		return nil, nil, stepSkip
	}

	return pod, cs, stepProbe
}

// gate runs the kubelet's checks on the container instance before a probe.
func (w *Worker) gate(ctx context.Context, pod *v1.Pod, cs *v1.ContainerStatus) int {
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
		return stepSkip
	}

	if cs.State.Running == nil {
		w.vlog(3, "Non-running container probed")
		w.state = StateContainerNotRunning
		if w.containerID != "" {
			w.cfg.Results.Set(w.containerID, results.Value{Result: results.Failure}, pod)
		}
		// Go on unless the container will not run again: by its exit code,
		// under the pod's and its own restart policy and restart rules
		// (KEP-5307, on by default from 1.35), or because every container of
		// the pod is restarting, as the kubelet's worker decides.
		if cs.State.Terminated == nil ||
			restartpolicy.WillRunAgain(pod, w.cfg.Container.Name, cs.State.Terminated.ExitCode) {
			return stepSkip
		}
		w.state = StateStopped
		return stepStop
	}

	// Graceful shutdown of the pod: liveness and startup must not kill a
	// container that is being stopped anyway. Readiness goes on.
	if pod.DeletionTimestamp != nil && (w.cfg.ProbeType == probespec.Liveness || w.cfg.ProbeType == probespec.Startup) {
		w.vlog(3, "Pod deletion requested, setting probe result to success")
		if w.cfg.ProbeType == probespec.Startup {
			w.vlog(0, "Pod deletion requested before container has fully started")
		}
		w.cfg.Results.Set(w.containerID, results.Value{Result: results.Success}, pod)
		w.state = StateStopped
		return stepStop
	}

	// Probe disabled for initialDelaySeconds after the container started.
	// Whole seconds, truncated, as the kubelet compares them (in 64 bits, so a
	// missing start time cannot overflow into "not yet").
	elapsed := w.cfg.Clock.Since(cs.State.Running.StartedAt.Time)
	if int64(elapsed.Seconds()) < int64(w.cfg.Spec.InitialDelaySeconds) {
		w.state = StateInitialDelay
		return stepSkip
	}

	if w.isStarted(pod, cs) {
		// A started container needs no startup probe; the worker stays for the
		// next instance.
		if w.cfg.ProbeType == probespec.Startup {
			w.state = StateOnHold
			return stepSkip
		}
	} else if w.cfg.ProbeType != probespec.Startup {
		// Liveness and readiness wait for the container to start.
		w.state = StateWaitingForStartup
		return stepSkip
	}

	w.state = StateRunning
	w.publish() // a slow probe shows as running while in flight
	return stepProbe
}

// probeAndCount probes and applies the thresholds.
func (w *Worker) probeAndCount(ctx context.Context, pod *v1.Pod, cs *v1.ContainerStatus) bool {
	start, result, output, err := w.probe(ctx, pod, cs)
	if !w.recordProbe(start, result, output, err) {
		// Prober error: throw the result away.
		return true
	}
	if w.deletedMeanwhile() {
		// The pod's deletion began while the probe ran: as at the top of a
		// step, liveness and startup end with Success, and nothing is killed
		// (the kubelet never restarts a container of a terminating pod).
		w.cfg.Results.Set(w.containerID, results.Value{Result: results.Success}, pod)
		w.state = StateStopped
		return false
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

	// The output goes with the result, so the condition it sets carries the
	// text of the probe that decided it.
	w.cfg.Results.Set(w.containerID, results.Value{Result: result, Output: decidingOutput(result, output), Probed: true}, pod)
	if result != w.decided {
		w.resultChanged(pod, result, output)
	}

	// A liveness failure means a restart: stop probing until a new container
	// appears (probing a container being stopped can corrupt it, kubernetes
	// #21751). A startup probe holds on any result at its threshold, so it
	// does not run again for this instance (kubernetes #117153).
	if (w.cfg.ProbeType == probespec.Liveness && result == results.Failure) || w.cfg.ProbeType == probespec.Startup {
		w.onHold = true
		w.resultRun = 0
		w.state = StateOnHold
		if result == results.Failure {
			w.kill(ctx, pod)
		}
	}
	return true
}

// resultChanged records the instance's new decided result and, when
// asked for, says so in a Normal event. A success's output never goes in
// it, as it never goes in pod status.
func (w *Worker) resultChanged(pod *v1.Pod, result results.Result, output string) {
	from := w.decided
	w.decided = result
	if !w.cfg.ResultChangeEvents {
		return
	}
	msg := fmt.Sprintf("%s probe result changed from %s to %s", w.cfg.ProbeType, from, result)
	if out := decidingOutput(result, output); out != "" {
		msg += ": " + out
	}
	w.events.pod = pod
	w.events.Event(v1.EventTypeNormal, prober.ReasonProbeResultChanged, msg)
}

// maxDecidingOutput bounds the output kept with a published result: more
// than a condition message holds (1 KiB), far less than a probe may return.
const maxDecidingOutput = 2 << 10

// decidingOutput is what the results cache keeps of a deciding probe's
// output: nothing for a success (pod status never carries a success's body
// or output: it could be any internal endpoint's answer), else its start,
// copied so that the probe's 10 KiB buffer is not kept alive.
func decidingOutput(r results.Result, output string) string {
	if r == results.Success || output == "" {
		return ""
	}
	if len(output) > maxDecidingOutput {
		cut := maxDecidingOutput
		for cut > 0 && !utf8.RuneStart(output[cut]) {
			cut--
		}
		output = output[:cut]
	}
	return strings.Clone(output)
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
	initial := results.Value{Result: w.initial}
	if first && w.cfg.InitialResult != nil {
		if seed, ok := w.cfg.InitialResult(id); ok {
			// Established by probed's probes before it restarted.
			initial = results.Value{Result: seed, Probed: true, Seeded: true}
			if klog.V(3).Enabled() {
				w.vlog(3, "Seeding probe result for a container seen before a restart", "containerID", id, "result", seed)
			}
		}
	}
	w.cfg.Results.Set(id, initial, pod)
	w.decided = initial.Result
	w.onHold = false
	w.killPending = false
	w.restartDeferred = ""
}

// probe runs the prober once.
func (w *Worker) probe(ctx context.Context, pod *v1.Pod, cs *v1.ContainerStatus) (start time.Time, result results.Result, output string, err error) {
	w.events.pod = pod
	start = w.cfg.Clock.Now()
	target := prober.Target{
		PodIP:       pod.Status.PodIP,
		PodIPs:      w.targetIPs(pod),
		ContainerID: cs.ContainerID,
		Ports:       w.cfg.Container.Ports,
		Env:         w.cfg.Container.Env,
		KeepAlive:   w.cfg.KeepAlive,
		HTTPCheck:   w.cfg.HTTPCheck,
		PodUID:      w.cfg.PodUID,
		TLS:         w.cfg.TLS,
		Timeout:     w.cfg.Timeout,
		Session:     w.session,
		FromPod:     w.cfg.FromPod,
	}
	if w.cfg.FromPod && w.cfg.PodNetworks != nil {
		target.PodNetns = func(ctx context.Context) (*netns.NS, error) {
			return w.netns.Get(ctx, w.cfg.PodNetworks, cs.ContainerID)
		}
	}
	if o := w.cfg.OwnIPs; o != nil {
		// Only the IPs the node vouches for are exempt from the host policy.
		target.PodIPs = o.Narrow(ctx, pod, target.PodIPs, cs.ContainerID)
		target.PodIPsVerified = !o.TrustStatus
	}
	result, output, err = w.cfg.Prober.Probe(ctx, w.cfg.ProbeType, w.cfg.Spec, target, &w.events)
	if w.cfg.ProbeType == probespec.Liveness && err == nil && result == results.Success && w.cfg.Liveness != nil {
		w.cfg.Liveness.LivenessPassed(w.cfg.PodUID, w.cfg.Container.Name)
	}
	return start, result, output, err
}

// recordProbe records a probe in the history and metrics, and reports
// whether its result counts (false when the prober returned an error).
func (w *Worker) recordProbe(start time.Time, result results.Result, output string, err error) bool {
	took := w.cfg.Clock.Since(start)
	if err != nil {
		w.record(start, result, took, excerpt(output), true, excerpt(err.Error()))
		if klog.V(1).Enabled() {
			w.vlog(1, "Probe errored; result discarded", "err", err)
		}
		return false
	}
	w.record(start, result, took, excerpt(output), false, "")
	w.cfg.Metrics.observeProbe(&w.series, result, took.Seconds())
	return true
}

// kill stops the container through the Killer. Failures are logged, counted
// and retried on a later step while this instance still runs.
func (w *Worker) kill(ctx context.Context, pod *v1.Pod) {
	if w.cfg.Killer == nil {
		return
	}
	err := w.cfg.Killer.Kill(ctx, pod, w.cfg.Container, w.containerID, w.cfg.ProbeType, w.cfg.Spec)
	if err != nil {
		w.killPending = true
		if isDeferred(err) {
			// A designed pause (restart budget, workload guard, PDB),
			// reported by the guard itself: not a failure to stop the
			// container.
			w.restartDeferred = err.Error()
			w.cfg.Metrics.countKill(&w.series, KillOutcomeDeferred)
			w.vlog(2, "Container restart deferred; will retry", "containerID", w.containerID, "reason", err)
			w.probeAgain(pod, err)
			return
		}
		w.cfg.Metrics.countKill(&w.series, KillOutcomeError)
		klog.ErrorS(err, "Failed to stop container after probe failure; will retry", w.logKV("containerID", w.containerID)...)
		return
	}
	w.killPending = false
	w.restartDeferred = ""
	w.cfg.Metrics.countKill(&w.series, KillOutcomeSuccess)
	klog.InfoS("Stopped container after probe failure", w.logKV("containerID", w.containerID)...)
}

// deletedMeanwhile reports, for liveness and startup, whether the pod read
// before the probe has since started terminating.
func (w *Worker) deletedMeanwhile() bool {
	if w.cfg.ProbeType != probespec.Liveness && w.cfg.ProbeType != probespec.Startup {
		return false
	}
	latest, ok := w.cfg.Pods.Pod(w.cfg.PodUID)
	return ok && latest != nil && latest.DeletionTimestamp != nil
}

// isDeferred reports whether a Killer held a kill back on purpose
// (kill.DeferredError says Deferred()).
func isDeferred(err error) bool {
	var d interface{ Deferred() bool }
	return errors.As(err, &d) && d.Deferred()
}

// isStarted is probed's notion of "started" for this container instance.
func (w *Worker) isStarted(pod *v1.Pod, cs *v1.ContainerStatus) bool {
	if w.cfg.Started != nil {
		return w.cfg.Started(pod, cs)
	}
	return cs.Started != nil && *cs.Started
}
