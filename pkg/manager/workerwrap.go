package manager

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/prober"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// LivenessTracker hears the liveness outcomes the restart guard needs
// (kill.Workloads is one). Its methods must not block.
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
