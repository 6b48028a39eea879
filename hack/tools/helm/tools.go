//go:build tools

// Package tools pins helm's command for hack/helm.sh.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
