package prober

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func benchGRPCServer(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	b.Cleanup(func() { hs.Shutdown(); s.Stop(); <-done })
	_, port := hostPort(b, l.Addr().String())
	return port
}

// BenchmarkGRPCProbeGRPCGo is the probe before the fast path: grpc-go for
// every probe.
func BenchmarkGRPCProbeGRPCGo(b *testing.B) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(benchGRPCServer(b)))
	p := New(nil, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res, out, err := p.grpc.probeGRPCGo(ctx, addr, "", time.Second); res != Success {
			b.Fatalf("probe = %v, %q, %v", res, out, err)
		}
	}
}

// BenchmarkGRPCProbeFast is the fast path on a new connection per probe.
func BenchmarkGRPCProbeFast(b *testing.B) {
	benchGRPCSession(b, nil, false)
}

// BenchmarkGRPCProbeKeepAlive reuses one connection (opt-in).
func BenchmarkGRPCProbeKeepAlive(b *testing.B) {
	s := NewSession()
	defer s.Close()
	benchGRPCSession(b, s, true)
}

func benchGRPCSession(b *testing.B, s *Session, keepAlive bool) {
	port := benchGRPCServer(b)
	p := New(nil, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res, out, err := p.grpc.probeSession(ctx, s, keepAlive, "127.0.0.1", "", port, time.Second); res != Success {
			b.Fatalf("probe = %v, %q, %v", res, out, err)
		}
	}
}
