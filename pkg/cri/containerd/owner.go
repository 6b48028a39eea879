package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"
	"github.com/probed-dev/probed/pkg/cri"
)

// containerd's CRI plugin marks what it creates with a kind label, which no
// image or CRI request can set (containerd reserves its label namespace).
const (
	criKindLabel     = "io.cri-containerd.kind"
	criKindContainer = "container"
	criKindSandbox   = "sandbox"
)

// containerOwner reads the container's record from containerd: its labels,
// and the labels and IPs of the sandbox container it names. Both must carry
// the CRI plugin's kind label.
func (r *Containerd) ContainerOwner(ctx context.Context, containerID string) (cri.RuntimeOwner, error) {
	id, err := r.parseID(containerID)
	if err != nil {
		return cri.RuntimeOwner{}, err
	}
	ctx = r.withNamespace(ctx)
	info, err := r.containerInfo(ctx, containerID, id)
	if err != nil {
		return cri.RuntimeOwner{}, err
	}
	o := cri.RuntimeOwner{Labels: info.Labels}
	sandboxID := sandboxOf(info)
	if info.Labels[criKindLabel] != criKindContainer || sandboxID == "" {
		return o, nil
	}
	sb, err := r.containerInfo(ctx, containerID, sandboxID)
	if err != nil {
		if errors.Is(err, cri.ErrContainerNotFound) {
			return o, nil
		}
		return cri.RuntimeOwner{}, fmt.Errorf("container %s: its pod sandbox: %w", containerID, err)
	}
	o.SandboxLabels = sb.Labels
	o.KindOK = sb.Labels[criKindLabel] == criKindSandbox
	o.SandboxIPs = sandboxIPsOf(sb)
	o.SandboxNetNS = sandboxNetNSOf(sb)
	o.SandboxRuntime = sb.Runtime.Name
	return o, nil
}

// containerOwner is the native client's: the same records the kill uses.
func (r *ContainerdCRI) ContainerOwner(ctx context.Context, containerID string) (cri.RuntimeOwner, error) {
	return r.native.ContainerOwner(ctx, containerID)
}

func (r *Containerd) containerInfo(ctx context.Context, containerID, id string) (containers.Container, error) {
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return containers.Container{}, fmt.Errorf("container %s: %w", containerID, cri.ErrContainerNotFound)
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

// criSandboxMetadataExtension is where containerd's CRI plugin (1.6 to 2.x)
// keeps a sandbox's record on its pause container, the IPs its network
// plugin gave it included.
const criSandboxMetadataExtension = "io.cri-containerd.sandbox.metadata"

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

// sandboxNetNSOf reads the path of the network namespace the CRI plugin
// made for a sandbox from its record; empty on the host network or when
// the record cannot be read.
func sandboxNetNSOf(info containers.Container) string {
	ext, ok := info.Extensions[criSandboxMetadataExtension]
	if !ok || ext == nil {
		return ""
	}
	var meta struct{ Metadata struct{ NetNSPath string } }
	if err := json.Unmarshal(ext.GetValue(), &meta); err != nil {
		return ""
	}
	return meta.Metadata.NetNSPath
}
