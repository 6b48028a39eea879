//go:build integration

package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// nextIP hands each test its own 127.0.0.x, so targets never collide.
var nextIP atomic.Int32

func loopbackIP() string {
	return fmt.Sprintf("127.0.0.%d", 10+nextIP.Add(1)%240)
}

// httpTarget is a real HTTP server whose /ready and /healthz answers the test flips.
type httpTarget struct {
	IP      string
	Port    int
	healthy atomic.Bool
	hits    atomic.Int64
}

func startHTTPTarget(t *testing.T, ip string, healthy bool) *httpTarget {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	tg := &httpTarget{IP: ip, Port: ln.Addr().(*net.TCPAddr).Port}
	tg.healthy.Store(healthy)
	mux := http.NewServeMux()
	handler := func(w http.ResponseWriter, _ *http.Request) {
		tg.hits.Add(1)
		if tg.healthy.Load() {
			fmt.Fprint(w, "ok")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "not ok")
	}
	mux.HandleFunc("/ready", handler)
	mux.HandleFunc("/healthz", handler)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return tg
}

func (tg *httpTarget) Set(healthy bool) { tg.healthy.Store(healthy) }
func (tg *httpTarget) PortStr() string  { return strconv.Itoa(tg.Port) }

// grpcTarget is a real gRPC health server.
type grpcTarget struct {
	IP   string
	Port int
	hs   *health.Server
}

func startGRPCTarget(t *testing.T, ip string) *grpcTarget {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return &grpcTarget{IP: ip, Port: ln.Addr().(*net.TCPAddr).Port, hs: hs}
}

func (g *grpcTarget) Set(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	g.hs.SetServingStatus("", st)
}

// tcpTarget accepts connections until closed.
func startTCPTarget(t *testing.T, ip string) (port int, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	stop = func() { cancel(); _ = ln.Close() }
	t.Cleanup(stop)
	return ln.Addr().(*net.TCPAddr).Port, stop
}
