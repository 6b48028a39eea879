package runtimeservice

import (
	"context"
	"encoding/json"
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
	// Verbose: the runtime's info names the sandbox's network namespace
	// and runtime (read once per container ID).
	sb, err := r.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: c.GetPodSandboxId(), Verbose: true})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return cri.RuntimeOwner{Labels: c.GetLabels()}, nil // no sandbox: not a pod's
		}
		return cri.RuntimeOwner{}, fmt.Errorf("container %s: its pod sandbox: %w", containerID, err)
	}
	netNS, rt := criSandboxInfo(sb.GetInfo())
	return cri.RuntimeOwner{Labels: c.GetLabels(), SandboxLabels: sb.GetStatus().GetLabels(), KindOK: true, SandboxIPs: criSandboxIPs(sb.GetStatus()),
		SandboxNetNS: netNS, SandboxRuntime: rt}, nil
}

// criSandboxInfo reads a sandbox's network namespace path and runtime
// from a verbose PodSandboxStatus's info, as containerd's CRI plugin
// writes it ("info": {"runtimeType", "runtimeSpec": {"linux":
// {"namespaces"}}}); empty what it does not say.
func criSandboxInfo(info map[string]string) (netNS, runtime string) {
	var v struct {
		RuntimeType string `json:"runtimeType"`
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct {
					Type string `json:"type"`
					Path string `json:"path"`
				} `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(info["info"]), &v); err != nil {
		return "", ""
	}
	for _, ns := range v.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			netNS = ns.Path
		}
	}
	return netNS, v.RuntimeType
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
