package manager

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/restartguard"
	"github.com/probed-dev/probed/pkg/results"
	"github.com/probed-dev/probed/pkg/worker"
)

// LivenessTracker hears the liveness outcomes the restart guard needs
// (restartguard.Workloads is one). Its methods must not block.
type LivenessTracker interface {
	// LivenessPassed: a liveness probe of the container passed, or the
	// container no longer has a liveness probe.
	LivenessPassed(podUID types.UID, container string)
	// ForgetPod: the pod left the node or finished.
	ForgetPod(podUID types.UID)
}

// workerProber is the Prober one worker gets. It narrows the target's
// status IPs, which the worker filled from the pod it probes, to those the
// node vouches for as the pod's own (ownIPs), which the host policy always
// allows, and tells the liveness tracker when a liveness probe passes.
type workerProber struct {
	m   *Manager
	uid types.UID
	pod klog.ObjectRef
	// hostNetwork is the pod's spec.hostNetwork, which cannot change.
	hostNetwork bool
	container   string
}

func (p workerProber) Probe(ctx context.Context, t probespec.ProbeType, spec *v1.Probe, target prober.Target, events prober.EventSink) (results.Result, string, error) {
	target.PodIPs = p.m.ownIPs(ctx, p.pod, p.hostNetwork, target.PodIPs, target.ContainerID)
	target.PodIPsVerified = !p.m.opts.TrustPodStatusIPs
	res, out, err := p.m.opts.Prober.Probe(ctx, t, spec, target, events)
	if t == probespec.Liveness && err == nil && res == results.Success && p.m.opts.Liveness != nil {
		p.m.opts.Liveness.LivenessPassed(p.uid, p.container)
	}
	return res, out, err
}

// workerKiller is the Killer one worker gets. When the restart guard
// cancels a kill for good (the workload guard), it starts the worker over,
// so that the container is probed again rather than left on hold: its
// restart then only happens if it still fails its liveness probe once the
// pause is over.
type workerKiller struct {
	m   *Manager
	ctx context.Context // the manager's run context, for the replacement
	uid types.UID
	key probeKey
	w   **worker.Worker
}

func (k workerKiller) Kill(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID string, t probespec.ProbeType, spec *v1.Probe) error {
	err := k.m.opts.Killer.Kill(ctx, pod, c, containerID, t, spec)
	if d, ok := restartguard.AsDeferred(err); ok && d.Reprobe {
		k.m.restartWorker(k.ctx, k.uid, k.key, *k.w)
	}
	return err
}

// restartWorker replaces a worker by a fresh one for the same probe, as an
// edit of the probe would, unless it was already replaced or removed. It is
// called from the worker's own goroutine, so it must not wait for it: the
// replacement starts once the old worker has exited, and one probe period
// later, so that the container is probed at the probe's own pace and the
// kill asked for again after failureThreshold periods, never in a loop.
func (m *Manager) restartWorker(ctx context.Context, uid types.UID, k probeKey, old *worker.Worker) {
	pod, ok := m.Pod(uid)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[uid]
	if e == nil || e.workers[k] != old {
		return
	}
	d, ok := e.specs[k]
	if !ok {
		return
	}
	klog.V(2).InfoS("Restart cancelled by the restart guard; probing the container afresh", "pod", klog.KObj(pod), "container", k.container, "probeType", k.probeType)
	old.Stop()
	delete(e.workers, k)
	period := d.PeriodDuration()
	if period <= 0 {
		period = 10 * time.Second
	}
	m.startWorkerLocked(ctx, pod, e, d, m.afterThenWait(ctx, old.Done(), period))
}

// afterThenWait returns a channel closed d after done is closed, or when
// ctx ends.
func (m *Manager) afterThenWait(ctx context.Context, done <-chan struct{}, d time.Duration) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		defer close(out)
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
		t := m.opts.Clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
		}
	}()
	return out
}
