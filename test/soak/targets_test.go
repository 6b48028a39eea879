//go:build soak

package soak

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// site is one 127.0.0.x "pod IP" with multiplexing targets that many pods
// share: an HTTP server whose per-pod paths answer 200 or 503, a gRPC health
// server with a per-pod service, an always-open TCP port, and a pool of TCP
// ports that are opened and closed to flip whole groups of pods.
type site struct {
	IP       string
	HTTPPort int
	GRPCPort int
	LivePort int
	Flips    []*flipPort

	paths    sync.Map // "/ready/<pod>" → bool
	services sync.Map // service name → bool
}

const flipPortsPerSite = 4

func startSite(t *testing.T, ip string) *site {
	t.Helper()
	s := &site{IP: ip}

	httpLn := mustListen(t, ip)
	s.HTTPPort = port(httpLn)
	srv := &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(httpLn) }()
	t.Cleanup(func() { _ = srv.Close() })

	grpcLn := mustListen(t, ip)
	s.GRPCPort = port(grpcLn)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, &healthServer{site: s})
	go func() { _ = gs.Serve(grpcLn) }()
	t.Cleanup(gs.Stop)
	s.services.Store("", true) // the liveness service: always serving

	liveLn := mustListen(t, ip)
	s.LivePort = port(liveLn)
	go acceptAndClose(liveLn)
	t.Cleanup(func() { _ = liveLn.Close() })

	for range flipPortsPerSite {
		f := &flipPort{ip: ip}
		if err := f.open(); err != nil {
			t.Fatal(err)
		}
		s.Flips = append(s.Flips, f)
		t.Cleanup(f.close)
	}
	return s
}

func (s *site) serveHTTP(w http.ResponseWriter, r *http.Request) {
	ok, _ := s.paths.Load(r.URL.Path)
	if r.URL.Path == "/healthz" || ok == true {
		_, _ = fmt.Fprint(w, "ok")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = fmt.Fprint(w, "not ok")
}

// healthServer answers grpc.health.v1 Check from the site's service map; an
// unknown service is NotFound, which fails the probe as the kubelet's would.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	site *site
}

func (h *healthServer) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	v, found := h.site.services.Load(req.GetService())
	if !found {
		return nil, status.Error(codes.NotFound, "unknown service")
	}
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if v == true {
		st = healthpb.HealthCheckResponse_SERVING
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// flipPort is a TCP port that is open (healthy) or closed (refused).
type flipPort struct {
	ip   string
	Port int
	mu   sync.Mutex
	ln   net.Listener
}

func (f *flipPort) Up() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ln != nil
}

func (f *flipPort) open() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		return nil
	}
	ln, err := listen(f.ip, f.Port)
	if err != nil {
		return err
	}
	f.ln, f.Port = ln, port(ln)
	go acceptAndClose(ln)
	return nil
}

func (f *flipPort) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		_ = f.ln.Close()
		f.ln = nil
	}
}

func mustListen(t *testing.T, ip string) net.Listener {
	t.Helper()
	ln, err := listen(ip, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func listen(ip string, p int) (net.Listener, error) {
	var err error
	// Re-opening a flip port can race the old socket's teardown for a moment.
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(p))); err == nil {
			return ln, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("listen on %s:%d: %w", ip, p, err)
}

func port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

func acceptAndClose(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.Close()
	}
}
