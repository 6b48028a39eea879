// Package deploy holds manifests of deploy/ that probed itself compares a
// cluster with.
package deploy

import _ "embed"

// ProbeReach is probe-reach.yaml: the probed-probe-reach
// ValidatingAdmissionPolicy and its binding, which probed checks the
// cluster's against (pkg/reachpolicy).
//
//go:embed probe-reach.yaml
var ProbeReach []byte
