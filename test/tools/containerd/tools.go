//go:build tools

// Package tools pins the containerd commands that hack/build-containerd.sh
// builds, so that `go mod tidy` keeps their dependencies in go.sum.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
