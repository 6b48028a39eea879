//go:build scale

// Package scale measures what a fleet of probed costs the control plane
// (issue 16). One real etcd and kube-apiserver serve N simulated nodes; each
// node has its own probed process built from ./cmd/probed, with its own bound
// service-account token and the node confinement of deploy/, a simulated CRI
// runtime on a unix socket, and M pods whose probes hit real servers on
// 127.x addresses. The test plays every kubelet: it binds pods, writes their
// status, restarts killed containers and recomputes Ready when probed's
// readiness gate flips. Every figure is read from the apiserver's own
// /metrics (per identity through FlowSchemas) and from /proc.
package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/proc"

	"github.com/probed-dev/probed/test/scale/apiload"
)

var (
	cp        *controlplane.ControlPlane
	client    kubernetes.Interface
	probedBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "probed-scale-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	probedBin = filepath.Join(dir, "probed")
	// No -race: dozens of daemons under the race detector would measure
	// the detector. The integration tier covers races.
	if err := proc.Build(ctx, probedBin, "./cmd/probed", proc.BuildOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "building probed:", err)
		return 1
	}
	cp, err = controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer cp.Stop()
	// The harness creates thousands of pods in bursts; client-go's default
	// 5 QPS would make it, not probed, the slow part. Its requests run as
	// system:masters, which APF exempts and our FlowSchemas do not count.
	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = 1000, 2000
	if client, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := applyAccessManifests(ctx, client); err != nil {
		fmt.Fprintln(os.Stderr, "applying deploy/ access manifests:", err)
		return 1
	}
	if err := apiload.EnsureFlowSchemas(ctx, client); err != nil {
		fmt.Fprintln(os.Stderr, "flow schemas:", err)
		return 1
	}
	return m.Run()
}
