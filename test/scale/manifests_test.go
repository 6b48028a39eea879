//go:build scale

package scale

import (
	"context"
	"fmt"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/harness/manifest"
)

// accessManifests are the deploy/ files that give probed its identity, RBAC
// and node confinement; the DaemonSet in daemonset.yaml is skipped (no
// kubelet runs it here), and so is anything not about probed's access.
var accessManifests = []string{"daemonset.yaml", "confinement.yaml"}

// applyAccessManifests creates probed's namespace, service account, RBAC and
// the ValidatingAdmissionPolicies that confine each probed to its node, as
// shipped, so that every write measured here passed the same admission.
func applyAccessManifests(ctx context.Context, c kubernetes.Interface) error {
	for _, f := range accessManifests {
		path := filepath.Join("../../deploy", f)
		objs, err := manifest.TypedFiles(path)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if _, ok := obj.(*appsv1.DaemonSet); ok {
				continue
			}
			if err := manifest.CreateIfMissing(ctx, c, obj); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return nil
}
