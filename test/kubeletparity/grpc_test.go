package kubeletparity

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/tap"
	v1 "k8s.io/api/core/v1"
)

func grpcSpec(port int, service string, useTLS bool) *v1.Probe {
	g := &v1.GRPCAction{Port: int32(port), Service: &service}
	if useTLS {
		mode := v1.GRPCProbeModeTLS
		g.Mode = &mode
	}
	return &v1.Probe{TimeoutSeconds: 2, ProbeHandler: v1.ProbeHandler{GRPC: g}}
}

// blocking answers Check only when the caller gives up.
type blocking struct {
	healthpb.UnimplementedHealthServer
}

func (blocking) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// startGRPC serves a real grpc-go server, over TLS when tlsOn, and counts
// the calls it receives.
func startGRPC(t *testing.T, tlsOn bool, register func(*grpc.Server)) (int, func() int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var calls countingTap
	opts := []grpc.ServerOption{grpc.InTapHandle(calls.tap)}
	if tlsOn {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})))
	}
	s := grpc.NewServer(opts...)
	register(s)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().(*net.TCPAddr).Port, calls.n.Load
}

// TestGRPCMatchesKubelet: real grpc-go servers, plaintext and TLS
// (grpc.mode TLS, KEP-4939), and mismatched modes, through the kubelet's
// pkg/probe/grpc and probed.
func TestGRPCMatchesKubelet(t *testing.T) {
	t.Parallel()
	hs := health.NewServer()
	hs.SetServingStatus("ready", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("draining", healthpb.HealthCheckResponse_NOT_SERVING)
	withHealth := func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) }
	cases := []struct {
		name              string
		register          func(*grpc.Server)
		service           string
		serverTLS, useTLS bool
	}{
		{"serving", withHealth, "", false, false},
		{"named service", withHealth, "ready", false, false},
		{"not serving", withHealth, "draining", false, false},
		{"unknown service", withHealth, "nope", false, false},
		{"no health service", func(*grpc.Server) {}, "", false, false},
		{"rpc timeout", func(s *grpc.Server) { healthpb.RegisterHealthServer(s, blocking{}) }, "", false, false},
		{"TLS, serving", withHealth, "", true, true},
		{"TLS, not serving", withHealth, "draining", true, true},
		{"plaintext probe, TLS server", withHealth, "", true, false},
		{"TLS probe, plaintext server", withHealth, "", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			port, calls := startGRPC(t, tc.serverTLS, tc.register)
			compareOn(t, grpcSpec(port, tc.service, tc.useTLS), &v1.Container{Name: "app"}, false, calls)
		})
	}
	t.Run("closed port", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		compareOn(t, grpcSpec(port, "", false), &v1.Container{Name: "app"}, false, func() int32 { return 0 })
	})
}

// TestGRPCScriptsMatchKubelet: scripted HTTP/2 servers that answer
// Health/Check with every kind of hostile answer (statuses, bad messages,
// non-gRPC answers, resets, GOAWAYs, garbage, silence, failures before the
// request) get the same outcome from the kubelet's code and probed's, and
// the same number of requests.
func TestGRPCScriptsMatchKubelet(t *testing.T) {
	t.Parallel()
	for _, tc := range scriptedGRPCCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startH2Script(t, tc.script)
			compareOn(t, grpcSpec(srv.port, "", false), &v1.Container{Name: "app"}, false, srv.requests.Load)
		})
	}
}

type countingTap struct{ n atomic.Int32 }

func (c *countingTap) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	c.n.Add(1)
	return ctx, nil
}
