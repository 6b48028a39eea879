package worker

import (
	"context"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// SandboxIPSource says which IPs the node's runtime gave the sandbox a
// container runs in, for the caller's own container only (the cri.Owner
// in ctx; cri.Verified). It answers from a cache after the first call for a
// container ID.
type SandboxIPSource interface {
	SandboxIPs(ctx context.Context, containerID string) ([]string, error)
}

// OwnIPs decides which of a pod's status IPs the host policy may take as
// the pod's own. It is configured once and shared by every worker and the
// manager's sync-time checks; it keeps no state of its own.
//
// The kubelet probes the IP its own runtime gave the pod, whatever
// status.podIPs says, and anyone who may write pods/status (a controller
// granted it cluster-wide, say) can put the node's loopback or its
// metadata endpoint there.
type OwnIPs struct {
	// Guard says which addresses are the node's own; nil knows none.
	Guard *hostpolicy.Guard
	// Sandbox is the runtime's answer; nil where no runtime can say
	// (--runtime-type=none): then no status IP is the pod's own.
	Sandbox SandboxIPSource
	// TrustStatus takes status.podIPs as written (--trust-pod-status-ips).
	TrustStatus bool
}

// Narrow returns the IPs of statusIPs (PodIPs of the pod) that are the
// pod's own:
//   - with TrustStatus, statusIPs, as written;
//   - for a hostNetwork pod, those that are the node's own addresses
//     (NodeIPs): the kubelet gives such a pod the Node's;
//   - otherwise the IPs the runtime reports for the sandbox that
//     containerID, the probed container, runs in: none while it cannot say
//     (no runtime, a container ID that is not the pod's, an error).
func (o *OwnIPs) Narrow(ctx context.Context, pod *v1.Pod, statusIPs []string, containerID string) []string {
	switch {
	case o.TrustStatus:
		return statusIPs
	case pod.Spec.HostNetwork:
		return o.NodeIPs(statusIPs)
	case o.Sandbox == nil || containerID == "":
		return nil
	}
	ips, err := o.Sandbox.SandboxIPs(ctx, containerID)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("The runtime does not say which IPs the pod's sandbox has; none of its status IPs is taken as its own",
			"pod", klog.KObj(pod), "containerID", containerID, "err", err)
		return nil
	}
	return ips
}

// NodeIPs keeps the IPs that are the node's own addresses.
func (o *OwnIPs) NodeIPs(ips []string) []string {
	var out []string
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && o.Guard.IsNodeAddr(a) {
			out = append(out, s)
		}
	}
	return out
}

// SyncIPs returns the IPs that a probe's host, as written, is not judged
// against at sync time: a hostNetwork pod's own IPs (NodeIPs), or
// status.podIPs, which its probes' dials judge again against the runtime's
// answer (Narrow). A host literal that names one of them is left to the
// dial; every other is judged now.
func (o *OwnIPs) SyncIPs(pod *v1.Pod) []string {
	if pod.Spec.HostNetwork && !o.TrustStatus {
		return o.NodeIPs(PodIPs(pod))
	}
	return PodIPs(pod)
}
