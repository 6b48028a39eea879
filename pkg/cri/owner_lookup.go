package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerd's CRI plugin marks what it creates with a kind label, which no
// image or CRI request can set (containerd reserves its label namespace).
const (
	criKindLabel     = "io.cri-containerd.kind"
	criKindContainer = "container"
	criKindSandbox   = "sandbox"
)

// containerOwner asks CRI: the container's labels and sandbox from
// ListContainers (filtered to the ID, then matched exactly, since a
// runtime may resolve a prefix), then the sandbox's labels and IPs.
func (r *CRI) containerOwner(ctx context.Context, containerID string) (runtimeOwner, error) {
	id, err := ParseContainerID(containerID)
	if err != nil {
		return runtimeOwner{}, err
	}
	list, err := r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id.ID}})
	if err != nil {
		return runtimeOwner{}, fmt.Errorf("container %s: listing it: %w", containerID, err)
	}
	var c *runtimeapi.Container
	for _, x := range list.GetContainers() {
		if x.GetId() == id.ID {
			c = x
		}
	}
	if c == nil {
		return runtimeOwner{}, fmt.Errorf("container %s: %w", containerID, ErrContainerNotFound)
	}
	sb, err := r.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: c.GetPodSandboxId()})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return runtimeOwner{pod: c.GetLabels()}, nil // no sandbox: not a pod's
		}
		return runtimeOwner{}, fmt.Errorf("container %s: its pod sandbox: %w", containerID, err)
	}
	return runtimeOwner{pod: c.GetLabels(), sandbox: sb.GetStatus().GetLabels(), kindOK: true, sandboxIPs: criSandboxIPs(sb.GetStatus())}, nil
}

// containerOwner reads the container's record from containerd: its labels,
// and the labels and IPs of the sandbox container it names. Both must carry
// the CRI plugin's kind label.
func (r *Containerd) containerOwner(ctx context.Context, containerID string) (runtimeOwner, error) {
	id, err := r.parseID(containerID)
	if err != nil {
		return runtimeOwner{}, err
	}
	ctx = r.withNamespace(ctx)
	info, err := r.containerInfo(ctx, containerID, id)
	if err != nil {
		return runtimeOwner{}, err
	}
	o := runtimeOwner{pod: info.Labels}
	sandboxID := sandboxOf(info)
	if info.Labels[criKindLabel] != criKindContainer || sandboxID == "" {
		return o, nil
	}
	sb, err := r.containerInfo(ctx, containerID, sandboxID)
	if err != nil {
		if errors.Is(err, ErrContainerNotFound) {
			return o, nil
		}
		return runtimeOwner{}, fmt.Errorf("container %s: its pod sandbox: %w", containerID, err)
	}
	o.sandbox = sb.Labels
	o.kindOK = sb.Labels[criKindLabel] == criKindSandbox
	o.sandboxIPs = sandboxIPsOf(sb)
	return o, nil
}

// containerOwner is the native client's: the same records the kill uses.
func (r *ContainerdCRI) containerOwner(ctx context.Context, containerID string) (runtimeOwner, error) {
	return r.native.containerOwner(ctx, containerID)
}

func (r *Containerd) containerInfo(ctx context.Context, containerID, id string) (containers.Container, error) {
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return containers.Container{}, fmt.Errorf("container %s: %w", containerID, ErrContainerNotFound)
		}
		return containers.Container{}, fmt.Errorf("container %s: load: %w", containerID, err)
	}
	// LoadContainer fetched the record; this reads what it kept.
	return c.Info(ctx, containerd.WithoutRefreshedMetadata)
}

// sandboxOf finds a container's sandbox: containerd 1.7 and later record
// it; 1.6 only in the CRI plugin's metadata extension.
func sandboxOf(info containers.Container) string {
	if info.SandboxID != "" {
		return info.SandboxID
	}
	ext, ok := info.Extensions[criMetadataExtension]
	if !ok || ext == nil {
		return ""
	}
	var meta struct{ Metadata struct{ SandboxID string } }
	if err := json.Unmarshal(ext.GetValue(), &meta); err != nil {
		return ""
	}
	return meta.Metadata.SandboxID
}
