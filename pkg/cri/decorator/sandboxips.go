package decorator

import (
	"context"
	"fmt"

	"github.com/probed-dev/probed/pkg/cri"
)

// SandboxIPs returns the IPs the runtime gave the pod sandbox containerID
// runs in: what the kubelet writes into status.podIPs, and probes (CRI
// PodSandboxStatus network.ip and additional_ips). A sandbox on the host
// network has none. It answers only for the caller's own container (the
// Owner in ctx), by the labels an exec is checked against, so a container
// ID spoofed into the pod's status gets no IPs.
//
// The IPs are read with the labels, once per container ID: a sandbox keeps
// its IPs for life, and a new sandbox brings new container IDs.
func (v *Verified) SandboxIPs(ctx context.Context, containerID string) ([]string, error) {
	want, ok := cri.OwnerFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("pod IPs of container %s: %w", containerID, cri.ErrNoOwner)
	}
	got, err := v.owner(ctx, containerID)
	if err != nil {
		return nil, err
	}
	if !got.Matches(want) {
		return nil, &cri.OwnerMismatchError{ContainerID: containerID, Want: want, Op: "read the pod IPs of"}
	}
	return got.SandboxIPs, nil
}

// SandboxIPs asks the wrapped runtime (Verified); ErrNoSandboxIPs when it
// cannot tell.
func (l *Limited) SandboxIPs(ctx context.Context, containerID string) ([]string, error) {
	if s, ok := l.rt.(interface {
		SandboxIPs(context.Context, string) ([]string, error)
	}); ok {
		return s.SandboxIPs(ctx, containerID)
	}
	return nil, cri.ErrNoSandboxIPs
}

// SandboxNetwork returns what the runtime says of the network of the pod
// sandbox containerID runs in: its IPs, the path of its network namespace
// and the runtime it runs under, for probes sent from inside the pod. As
// SandboxIPs, it answers only for the caller's own container (the Owner
// in ctx), read once per container ID: a replaced sandbox brings new
// container IDs.
func (v *Verified) SandboxNetwork(ctx context.Context, containerID string) (cri.SandboxNetwork, error) {
	want, ok := cri.OwnerFrom(ctx)
	if !ok {
		return cri.SandboxNetwork{}, fmt.Errorf("network of container %s: %w", containerID, cri.ErrNoOwner)
	}
	got, err := v.owner(ctx, containerID)
	if err != nil {
		return cri.SandboxNetwork{}, err
	}
	if !got.Matches(want) {
		return cri.SandboxNetwork{}, &cri.OwnerMismatchError{ContainerID: containerID, Want: want, Op: "enter the network of"}
	}
	return cri.SandboxNetwork{IPs: got.SandboxIPs, NetNS: got.SandboxNetNS, Runtime: got.SandboxRuntime}, nil
}

// SandboxNetwork asks the wrapped runtime (Verified); ErrNoSandboxIPs when
// it cannot tell.
func (l *Limited) SandboxNetwork(ctx context.Context, containerID string) (cri.SandboxNetwork, error) {
	if s, ok := l.rt.(interface {
		SandboxNetwork(context.Context, string) (cri.SandboxNetwork, error)
	}); ok {
		return s.SandboxNetwork(ctx, containerID)
	}
	return cri.SandboxNetwork{}, cri.ErrNoSandboxIPs
}
