package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
)

// importImages loads the docker-archives from hack/build-images.sh into the
// k8s.io namespace and unpacks them for overlayfs, so CRI never tries to pull.
func (h *Containerd) importImages(ctx context.Context, dir string, names []string) error {
	client, err := containerd.New(h.Socket())
	if err != nil {
		return fmt.Errorf("connect for image import: %w", err)
	}
	defer client.Close()
	ctx = namespaces.WithNamespace(ctx, Namespace)
	for _, name := range names {
		path := filepath.Join(dir, name+".tar")
		if err := importOne(ctx, client, path); err != nil {
			return fmt.Errorf("import %s (run hack/build-images.sh first): %w", path, err)
		}
	}
	return nil
}

func importOne(ctx context.Context, client *containerd.Client, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	imgs, err := client.Import(ctx, f)
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if err := containerd.NewImage(client, img).Unpack(ctx, "overlayfs"); err != nil {
			return fmt.Errorf("unpack %s: %w", img.Name, err)
		}
	}
	return nil
}
