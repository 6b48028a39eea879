package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containerd/containerd/v2/core/containers"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ErrNoSandboxIPs: the runtime cannot say which IPs a pod's sandbox has
// (--runtime-type=none).
var ErrNoSandboxIPs = errors.New("no container runtime to say which IPs the pod's sandbox has")

// criSandboxMetadataExtension is where containerd's CRI plugin (1.6 to 2.x)
// keeps a sandbox's record on its pause container, the IPs its network
// plugin gave it included.
const criSandboxMetadataExtension = "io.cri-containerd.sandbox.metadata"

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
	want, ok := OwnerFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("pod IPs of container %s: %w", containerID, ErrNoOwner)
	}
	got, err := v.owner(ctx, containerID)
	if err != nil {
		return nil, err
	}
	if !got.matches(want) {
		return nil, &OwnerMismatchError{ContainerID: containerID, Want: want, Op: "read the pod IPs of"}
	}
	return got.sandboxIPs, nil
}

// SandboxIPs asks the wrapped runtime (Verified); ErrNoSandboxIPs when it
// cannot tell.
func (l *Limited) SandboxIPs(ctx context.Context, containerID string) ([]string, error) {
	if s, ok := l.rt.(interface {
		SandboxIPs(context.Context, string) ([]string, error)
	}); ok {
		return s.SandboxIPs(ctx, containerID)
	}
	return nil, ErrNoSandboxIPs
}

// criSandboxIPs reads a CRI sandbox status's IPs, the primary one first.
func criSandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	n := s.GetNetwork()
	var out []string
	if ip := n.GetIp(); ip != "" {
		out = append(out, ip)
	}
	for _, a := range n.GetAdditionalIps() {
		if ip := a.GetIp(); ip != "" {
			out = append(out, ip)
		}
	}
	return out
}

// sandboxIPsOf reads the IPs from the CRI plugin's record of a sandbox
// (its pause container), the primary one first; none when the record has
// none or cannot be read.
func sandboxIPsOf(info containers.Container) []string {
	ext, ok := info.Extensions[criSandboxMetadataExtension]
	if !ok || ext == nil {
		return nil
	}
	var meta struct {
		Metadata struct {
			IP            string
			AdditionalIPs []string
		}
	}
	if err := json.Unmarshal(ext.GetValue(), &meta); err != nil {
		return nil
	}
	var out []string
	for _, ip := range append([]string{meta.Metadata.IP}, meta.Metadata.AdditionalIPs...) {
		if ip != "" {
			out = append(out, ip)
		}
	}
	return out
}
