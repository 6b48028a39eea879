package prober

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
)

// startGRPC serves srv's services on a loopback port until the test ends.
func startGRPC(t *testing.T, register func(*grpc.Server), opts ...grpc.ServerOption) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	register(s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(l)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	_, port := hostPort(t, l.Addr().String())
	return port
}

// blockingHealth answers Check only when the caller gives up.
type blockingHealth struct {
	healthpb.UnimplementedHealthServer
}

func (blockingHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// silentListener accepts connections and never says a word, so an HTTP/2
// handshake never completes.
func silentListener(t *testing.T) int {
	t.Helper()
	var mu sync.Mutex
	var conns []net.Conn
	// Registered first, so it runs after the accept loop has ended.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return acceptLoopback(t, func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	})
}

// acceptLoopback listens on a loopback port and hands each connection to
// handle, one after another; cleanup closes the listener and waits.
func acceptLoopback(t *testing.T, handle func(net.Conn)) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	_, port := hostPort(t, l.Addr().String())
	return port
}

func grpcSpec(port int, service string) *v1.Probe {
	g := &v1.GRPCAction{Port: int32(port)}
	if service != "" {
		g.Service = &service
	}
	return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: g}}
}

func TestGRPCProbe(t *testing.T) {
	t.Parallel()
	var uaMu sync.Mutex
	var userAgents []string
	recordUA := grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		uaMu.Lock()
		userAgents = append(userAgents, md.Get("user-agent")...)
		uaMu.Unlock()
		return h(ctx, req)
	})
	hs := health.NewServer()
	hs.SetServingStatus("ready", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("draining", healthpb.HealthCheckResponse_NOT_SERVING)
	healthy := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) }, recordUA)
	t.Cleanup(hs.Shutdown)
	noHealth := startGRPC(t, func(*grpc.Server) {})
	blocking := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, blockingHealth{}) })
	closed := closedPort(t)
	silent := silentListener(t)

	addr := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	cases := []struct {
		name       string
		port       int
		service    string
		wantResult Result
		wantOutput string
	}{
		{"serving, overall", healthy, "", Success, "service healthy"},
		{"serving, named service", healthy, "ready", Success, "service healthy"},
		{"not serving", healthy, "draining", Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", healthy, "nope", Failure,
			"error: health rpc probe failed: rpc error: code = NotFound desc = unknown service"},
		{"no health service", noHealth, "", Failure,
			"error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health"},
		{"rpc timeout", blocking, "", Failure, "timeout: health rpc did not complete within 1s"},
		// Like the kubelet's blocking dial, a refused port is retried until
		// the deadline: the outcome is the connect timeout.
		{"closed port", closed, "", Failure,
			fmt.Sprintf("timeout: failed to connect service %q within 1s: context deadline exceeded", addr(closed))},
		{"silent listener", silent, "", Failure,
			fmt.Sprintf("timeout: failed to connect service %q within 1s: context deadline exceeded", addr(silent))},
	}
	p := New(nil, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, out, err := p.runOnce(context.Background(), grpcSpec(tc.port, tc.service), Target{PodIP: "127.0.0.1"})
			if err != nil {
				t.Fatalf("gRPC probes never error, got %v", err)
			}
			if res != tc.wantResult || out != tc.wantOutput {
				t.Errorf("probe = %v, %q; want %v, %q", res, out, tc.wantResult, tc.wantOutput)
			}
		})
	}
	t.Cleanup(func() {
		uaMu.Lock()
		defer uaMu.Unlock()
		if len(userAgents) == 0 {
			t.Fatal("no user agent recorded")
		}
		for _, ua := range userAgents {
			if !strings.HasPrefix(ua, "kube-probe/1.37 ") {
				t.Errorf("user agent = %q; want kube-probe/1.37 first", ua)
			}
		}
	})
}

// TestGRPCConnectError: when connecting ends for another reason than the
// deadline (here the caller cancels), the kubelet's "failed to connect" text.
func TestGRPCConnectError(t *testing.T) {
	silent := silentListener(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	p := New(nil, Options{})
	res, out, err := p.grpc.probe(ctx, "127.0.0.1", "", silent, 5*time.Second)
	want := fmt.Sprintf("error: failed to connect service at %q: context canceled", fmt.Sprintf("127.0.0.1:%d", silent))
	if err != nil || res != Failure || out != want {
		t.Errorf("probe = %v, %q, %v; want Failure, %q", res, out, err, want)
	}
}

// TestGRPCBadTarget: a target the client cannot even be built for.
func TestGRPCBadTarget(t *testing.T) {
	p := New(nil, Options{})
	res, out, err := p.grpc.probe(context.Background(), "bad\x00host", "", 80, time.Second)
	t.Logf("output: %s", out)
	if err != nil || res != Failure || !strings.HasPrefix(out, `error: failed to connect service at "bad\x00host:80": `) {
		t.Errorf("probe = %v, %q, %v", res, out, err)
	}
}

// expiredHealth answers at once as a handler does whose deadline (the
// grpc-timeout we sent) has just run out.
type expiredHealth struct {
	healthpb.UnimplementedHealthServer
	calls atomic.Int32
}

func (h *expiredHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.calls.Add(1)
	return nil, status.Error(codes.DeadlineExceeded, "context deadline exceeded")
}

// TestGRPCServerDeadlineAnswer: a DEADLINE_EXCEEDED answer is the
// kubelet's RPC timeout, and the check is sent once.
func TestGRPCServerDeadlineAnswer(t *testing.T) {
	t.Parallel()
	h := &expiredHealth{}
	port := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, h) })
	p := New(nil, Options{})
	res, out, err := p.grpc.probe(context.Background(), "127.0.0.1", "", port, time.Second)
	if err != nil || res != Failure || out != "timeout: health rpc did not complete within 1s" {
		t.Errorf("probe = %v, %q, %v; want failure with the RPC timeout text", res, out, err)
	}
	if n := h.calls.Load(); n != 1 {
		t.Errorf("server saw %d checks; want 1 (no fallback)", n)
	}
}
