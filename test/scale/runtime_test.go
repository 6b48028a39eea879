//go:build scale

package scale

import (
	"context"
	"maps"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// simRuntime is a simulated node's container runtime: a CRI server on a
// unix socket that probed talks to with --runtime-type=cri. It only has to
// answer probed's calls: Status (for /readyz), ListContainers and
// PodSandboxStatus (whose a container is, with the kubelet's labels, which
// probed checks before a kill) and StopContainer (a liveness kill), which it
// hands to the stand-in kubelet as a container exit.
type simRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	Endpoint string
	onStop   func(containerID string)
	// labels are the kubelet's labels of a running container; false if
	// there is none by that ID.
	labels func(containerID string) (map[string]string, bool)

	mu    sync.Mutex
	stops int
}

func startRuntime(t *testing.T, dir string, onStop func(containerID string), labels func(containerID string) (map[string]string, bool)) *simRuntime {
	t.Helper()
	r := &simRuntime{onStop: onStop, labels: labels}
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

// The sandbox of container <id> is "sandbox-<id>".
const sandboxPrefix = "sandbox-"

func (r *simRuntime) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	id := req.GetFilter().GetId()
	labels, ok := r.labels(id)
	if !ok {
		return &runtimeapi.ListContainersResponse{}, nil
	}
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Id: id, PodSandboxId: sandboxPrefix + id, Labels: labels}}}, nil
}

func (r *simRuntime) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	id := strings.TrimPrefix(req.GetPodSandboxId(), sandboxPrefix)
	labels, ok := r.labels(id)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "sandbox %s not found", req.GetPodSandboxId())
	}
	sb := maps.Clone(labels)
	delete(sb, "io.kubernetes.container.name")
	return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: req.GetPodSandboxId(), Labels: sb}}, nil
}
