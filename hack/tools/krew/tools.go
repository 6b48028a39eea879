//go:build tools

// Module for building krew's own manifest validator and krew itself
// (hack/krew.sh), to check deploy/krew/probed.yaml as krew-index's CI does.
// Kept apart from the daemon's module so that krew's dependencies never
// enter probed's go.mod.
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
