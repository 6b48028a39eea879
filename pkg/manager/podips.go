package manager

import (
	"context"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/worker"
)

// SandboxIPSource says which IPs the node's runtime gave the sandbox a
// container runs in, for the caller's own container only (the cri.Owner
// in ctx; cri.Verified). It answers from a cache after the first call for a
// container ID.
type SandboxIPSource interface {
	SandboxIPs(ctx context.Context, containerID string) ([]string, error)
}

// ownIPs returns the IPs the host policy may take as the pod's own when one
// of its probes dials, from statusIPs, the pod's status IPs as the worker
// read them (worker.PodIPs). The kubelet probes the IP its own runtime gave the
// pod, whatever status.podIPs says, and anyone who may write pods/status
// (a controller granted it cluster-wide, say) can put the node's loopback
// or its metadata endpoint there. So they are:
//   - with TrustPodStatusIPs, statusIPs, as written;
//   - for a hostNetwork pod, those of statusIPs that are the node's own
//     addresses (hostpolicy.Guard.IsNodeAddr): the kubelet gives such a pod
//     the Node's;
//   - otherwise the IPs the runtime reports for the sandbox that
//     containerID, the probed container, runs in: none while it cannot say
//     (no runtime, a container ID that is not the pod's, an error).
func (m *Manager) ownIPs(ctx context.Context, pod klog.ObjectRef, hostNetwork bool, statusIPs []string, containerID string) []string {
	switch {
	case m.opts.TrustPodStatusIPs:
		return statusIPs
	case hostNetwork:
		return m.nodeIPs(statusIPs)
	case m.opts.SandboxIPs == nil || containerID == "":
		return nil
	}
	ips, err := m.opts.SandboxIPs.SandboxIPs(ctx, containerID)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("The runtime does not say which IPs the pod's sandbox has; none of its status IPs is taken as its own",
			"pod", pod, "containerID", containerID, "err", err)
		return nil
	}
	return ips
}

// nodeIPs keeps the IPs that are the node's own addresses.
func (m *Manager) nodeIPs(ips []string) []string {
	var out []string
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && m.opts.HostGuard.IsNodeAddr(a) {
			out = append(out, s)
		}
	}
	return out
}

// syncIPs returns the IPs that a probe's host, as written, is not judged
// against at sync time: a hostNetwork pod's own IPs (nodeIPs), or
// status.podIPs, which its probes' dials judge again against the runtime's
// answer (ownIPs). A host literal that names one of them is left to the
// dial; every other is judged now.
func (m *Manager) syncIPs(pod *v1.Pod) []string {
	if pod.Spec.HostNetwork && !m.opts.TrustPodStatusIPs {
		return m.nodeIPs(worker.PodIPs(pod))
	}
	return worker.PodIPs(pod)
}
