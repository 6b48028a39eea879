//go:build tools

// Package tools pins cyclonedx-gomod for hack/sbom.sh.
package tools

import _ "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
