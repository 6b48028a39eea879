//go:build scale

package scale

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// simRuntime is a simulated node's container runtime: a CRI server on a
// unix socket that probed talks to with --runtime-type=cri. It only has to
// answer probed's calls: Status (for /readyz) and StopContainer (a liveness
// kill), which it hands to the stand-in kubelet as a container exit.
type simRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	Endpoint string
	onStop   func(containerID string)

	mu    sync.Mutex
	stops int
}

func startRuntime(t *testing.T, dir string, onStop func(containerID string)) *simRuntime {
	t.Helper()
	r := &simRuntime{onStop: onStop}
	sock := filepath.Join(dir, "cri.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	r.Endpoint = "unix://" + sock
	s := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s, r)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return r
}

func (r *simRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "scale-sim", RuntimeVersion: "0", RuntimeApiVersion: "v1"}, nil
}

func (r *simRuntime) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}}, nil
}

func (r *simRuntime) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	r.mu.Lock()
	r.stops++
	r.mu.Unlock()
	r.onStop(req.GetContainerId())
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *simRuntime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: req.GetContainerId(), State: runtimeapi.ContainerState_CONTAINER_EXITED}}, nil
}

func (r *simRuntime) Stops() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stops
}
