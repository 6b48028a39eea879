//go:build integration

package integration

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// statusOnlyCRI answers CRI's Status with RuntimeReady: all that /readyz
// asks a runtime.
type statusOnlyCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (statusOnlyCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "readyz-test", RuntimeVersion: "0", RuntimeApiVersion: "v1"}, nil
}

func (statusOnlyCRI) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true}}}}, nil
}

// TestReadyzWaitsForTheRuntimesFirstAnswer: probed started against a
// runtime socket that does not exist (a wrong --runtime-endpoint, a runtime
// not started yet) is alive but not ready, however long it waits: the 30 s
// grace is for a runtime that answered before. Once a runtime answers on
// that socket, probed is ready without a restart.
func TestReadyzWaitsForTheRuntimesFirstAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A unix socket path must stay short: not under t.TempDir().
	dir, err := os.MkdirTemp("", "probed-cri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "cri.sock")

	p := e.startProbedNoWait("--runtime-type=cri", "--runtime-endpoint=unix://"+sock)
	eventually(t, "/healthz 200 and the informer synced", 30*time.Second, func() bool {
		c, _ := p.get("/healthz")
		_, body := p.get("/readyz")
		return c == http.StatusOK && strings.Contains(body, "informer-synced ok")
	})
	// Before this fix, /readyz said "runtime ok" here for the first 30 s.
	consistently(t, "/readyz 503 naming the runtime while no runtime ever answered", 3*time.Second, func() bool {
		c, body := p.get("/readyz")
		return c == http.StatusServiceUnavailable && strings.Contains(body, "runtime")
	})

	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, statusOnlyCRI{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	// probed checks every 5 s; its gRPC client redials with back-off.
	eventually(t, "/readyz 200 once the runtime answers", 60*time.Second, func() bool {
		c, _ := p.get("/readyz")
		return c == http.StatusOK
	})
}
