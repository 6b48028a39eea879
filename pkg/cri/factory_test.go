package cri

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeVersion struct {
	versionapi.UnimplementedVersionServer
}

func (fakeVersion) Version(context.Context, *emptypb.Empty) (*versionapi.VersionResponse, error) {
	return &versionapi.VersionResponse{Version: "fake"}, nil
}

type fakeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (fakeCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake"}, nil
}

func (fakeCRI) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
	}}}, nil
}

// serve starts a gRPC server on a unix socket with the given services.
func serve(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "rt.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return sock
}

func TestNewAutoDetects(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		register func(*grpc.Server)
		want     string
	}{
		{"containerd with its CRI plugin", func(s *grpc.Server) {
			versionapi.RegisterVersionServer(s, fakeVersion{})
			runtimeapi.RegisterRuntimeServiceServer(s, fakeCRI{})
		}, TypeContainerdCRI},
		{"containerd without CRI", func(s *grpc.Server) {
			versionapi.RegisterVersionServer(s, fakeVersion{})
		}, TypeNative},
		{"CRI only (CRI-O)", func(s *grpc.Server) {
			runtimeapi.RegisterRuntimeServiceServer(s, fakeCRI{})
		}, TypeCRI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := serve(t, tc.register)
			rt, err := New(ctx, Options{Endpoint: "unix://" + sock, DetectTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			if got := RuntimeName(rt); got != tc.want {
				t.Fatalf("picked %q, want %q", got, tc.want)
			}
			if tc.want == TypeCRI {
				if err := rt.Ready(ctx); err != nil {
					t.Fatalf("Ready: %v", err)
				}
			}
		})
	}
}
