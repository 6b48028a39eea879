package manager

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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

// workerProber is the Prober one worker gets. It completes the target with
// the pod's own IPs (ownIPs), which the host policy always allows, and
// tells the liveness tracker when a liveness probe passes.
type workerProber struct {
	m         *Manager
	uid       types.UID
	container string
}

func (p workerProber) Probe(ctx context.Context, t probespec.ProbeType, spec *v1.Probe, target prober.Target, events prober.EventSink) (results.Result, string, error) {
	if pod, ok := p.m.Pod(p.uid); ok {
		target.PodIPs = p.m.ownIPs(ctx, pod, target.ContainerID)
		target.PodIPsVerified = !p.m.opts.TrustPodStatusIPs
	}
	res, out, err := p.m.opts.Prober.Probe(ctx, t, spec, target, events)
	if t == probespec.Liveness && err == nil && res == results.Success && p.m.opts.Liveness != nil {
		p.m.opts.Liveness.LivenessPassed(p.uid, p.container)
	}
	return res, out, err
}
