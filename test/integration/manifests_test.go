//go:build integration

package integration

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/harness/manifest"
)

const deployDir = "../../deploy"

// loadManifests decodes every object of the files deploy/kustomization.yaml
// lists, in its order.
func loadManifests() ([]runtime.Object, error) {
	files, err := manifest.Resources(deployDir)
	if err != nil {
		return nil, err
	}
	return manifest.TypedFiles(files...)
}

// applyAccessManifests creates what deploy/ ships for probed's access: the
// namespace, service accounts, RBAC, the node-confinement policies, the
// scraper and plugin roles and the reviews' FlowSchema. The DaemonSet itself is for the end-to-end tier, where a
// kubelet runs it.
func applyAccessManifests(ctx context.Context, c kubernetes.Interface) error {
	objs, err := loadManifests()
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if _, ok := obj.(*appsv1.DaemonSet); ok {
			continue
		}
		if err := manifest.CreateIfMissing(ctx, c, obj); err != nil {
			return fmt.Errorf("%s: %w", deployDir, err)
		}
	}
	return nil
}
