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
