//go:build soak

// Package soak churns pods through the real probed binary against a real etcd
// and kube-apiserver for a bounded time (issue 8). The test plays the kubelet
// for pod status and runs the probe targets on 127.0.0.x; at the end it checks
// that probed is back to its baseline, that its RSS stayed flat and that every
// pod's conditions match its targets' health.
package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes"

	"github.com/probed-dev/probed/test/harness/controlplane"
	"github.com/probed-dev/probed/test/harness/proc"
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
	dir, err := os.MkdirTemp("", "probed-soak-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	probedBin = filepath.Join(dir, "probed")
	// No -race: the soak measures CPU and memory, which the race detector
	// inflates several times over. The integration tier covers races.
	if err := proc.Build(ctx, probedBin, "./cmd/probed", proc.BuildOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "building probed:", err)
		return 1
	}
	cp, err = controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = cp.Stop()
		}
	}()
	// The test creates, updates and deletes thousands of pods in bursts;
	// client-go's default 5 QPS would make the test the bottleneck.
	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = 1000, 2000
	if client, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	stopped = true
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	if code == 0 {
		// The API clients' idle connections are the only goroutines allowed
		// to outlive the test; the targets must all be stopped.
		if err := goleak.Find(
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
			goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "soak: goroutine leak in the test: %v\n", err)
			code = 1
		}
	}
	return code
}
