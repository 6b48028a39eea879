package runtimeservice

import (
	"context"
	"fmt"

	"github.com/probed-dev/probed/pkg/cri"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerOwner asks CRI: the container's labels and sandbox from
// ListContainers (filtered to the ID, then matched exactly, since a
// runtime may resolve a prefix), then the sandbox's labels and IPs.
func (r *CRI) ContainerOwner(ctx context.Context, containerID string) (cri.RuntimeOwner, error) {
	id, err := cri.ParseContainerID(containerID)
	if err != nil {
		return cri.RuntimeOwner{}, err
	}
	list, err := r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id.ID}})
	if err != nil {
		return cri.RuntimeOwner{}, fmt.Errorf("container %s: listing it: %w", containerID, err)
	}
	var c *runtimeapi.Container
	for _, x := range list.GetContainers() {
		if x.GetId() == id.ID {
			c = x
		}
	}
	if c == nil {
		return cri.RuntimeOwner{}, fmt.Errorf("container %s: %w", containerID, cri.ErrContainerNotFound)
	}
	sb, err := r.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: c.GetPodSandboxId()})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return cri.RuntimeOwner{Labels: c.GetLabels()}, nil // no sandbox: not a pod's
		}
		return cri.RuntimeOwner{}, fmt.Errorf("container %s: its pod sandbox: %w", containerID, err)
	}
	return cri.RuntimeOwner{Labels: c.GetLabels(), SandboxLabels: sb.GetStatus().GetLabels(), KindOK: true, SandboxIPs: criSandboxIPs(sb.GetStatus())}, nil
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
