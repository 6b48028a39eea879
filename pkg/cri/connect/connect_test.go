package connect

import (
	"context"
	"strings"
	"testing"
	"time"

	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"github.com/probed-dev/probed/pkg/cri"
	"github.com/probed-dev/probed/pkg/cri/internal/critest"
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

func TestNewAutoDetects(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		register func(*grpc.Server)
		want     string
	}{
		{"containerd with its CRI plugin", func(s *grpc.Server) {
			versionapi.RegisterVersionServer(s, fakeVersion{})
			runtimeapi.RegisterRuntimeServiceServer(s, critest.FakeCRI{})
		}, cri.TypeContainerdCRI},
		{"containerd without CRI", func(s *grpc.Server) {
			versionapi.RegisterVersionServer(s, fakeVersion{})
		}, cri.TypeNative},
		{"CRI only (CRI-O)", func(s *grpc.Server) {
			runtimeapi.RegisterRuntimeServiceServer(s, critest.FakeCRI{})
		}, cri.TypeCRI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := critest.Serve(t, tc.register)
			rt, err := New(ctx, cri.Options{Endpoint: "unix://" + sock, DetectTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			if got := cri.RuntimeName(rt); got != tc.want {
				t.Fatalf("picked %q, want %q", got, tc.want)
			}
			if tc.want == cri.TypeCRI {
				if err := rt.Ready(ctx); err != nil {
					t.Fatalf("Ready: %v", err)
				}
			}
		})
	}
}

func TestNewAutoFailsClearlyWithoutRuntime(t *testing.T) {
	ctx := context.Background()
	_, err := New(ctx, cri.Options{Endpoint: t.TempDir() + "/none.sock", DetectTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "detect runtime") {
		t.Fatalf("want a detection error, got %v", err)
	}
	// Explicit types connect lazily and report through Ready.
	rt, err := New(ctx, cri.Options{Endpoint: t.TempDir() + "/none.sock", Type: cri.TypeCRI})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := rt.Ready(rctx); err == nil {
		t.Fatal("Ready with no runtime: want an error")
	}
}
