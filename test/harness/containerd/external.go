package containerd

import (
	"context"
	"fmt"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// Helpers for harnesses built on this one (test/harness/node), which run a
// kubelet on the containerd and may outlive the process that started it.

// CgroupParent is the cgroup parent of this harness's pods (Options.CgroupParent).
func (h *Containerd) CgroupParent() string { return h.cgroupParent }

// CNIConfDir is the CRI plugin's CNI conf dir; Options.CNIConfList is written there.
func (h *Containerd) CNIConfDir() string { return h.path("cni") }

// ImportImage imports a docker-archive (or OCI archive) into the k8s.io
// namespace and unpacks it for overlayfs, so CRI finds it without pulling.
func (h *Containerd) ImportImage(ctx context.Context, archive string) error {
	return ImportArchive(ctx, h.Socket(), archive)
}

// ImportArchive is ImportImage for any containerd socket, e.g. one started
// by an earlier process.
func ImportArchive(ctx context.Context, socket, archive string) error {
	client, err := containerd.New(socket)
	if err != nil {
		return fmt.Errorf("connect to %s for image import: %w", socket, err)
	}
	defer client.Close()
	if err := importOne(namespaces.WithNamespace(ctx, Namespace), client, archive); err != nil {
		return fmt.Errorf("import %s: %w", archive, err)
	}
	return nil
}

// UnmountAll detaches every mount at or below dir, deepest first.
func UnmountAll(dir string) error {
	return (&Containerd{runDir: dir}).unmountAll()
}
