package prober

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// grpcConnCounter counts the connections it accepted and those whose
// peer has gone (a read saw EOF or an error).
type grpcConnCounter struct {
	net.Listener
	accepted, gone atomic.Int32
}

func (l *grpcConnCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	return &grpcCountedConn{Conn: c, l: l}, nil
}

type grpcCountedConn struct {
	net.Conn
	l    *grpcConnCounter
	once sync.Once
}

func (c *grpcCountedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.once.Do(func() { c.l.gone.Add(1) })
	}
	return n, err
}

// healthServer serves the standard health service on addr until stop.
func healthServer(t *testing.T, addr string) (l *grpcConnCounter, hs *health.Server, stop func()) {
	t.Helper()
	nl, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l = &grpcConnCounter{Listener: nl}
	s := grpc.NewServer()
	hs = health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(l) }()
	var once sync.Once
	stop = func() { once.Do(func() { hs.Shutdown(); s.Stop(); <-done }) }
	t.Cleanup(stop)
	return l, hs, stop
}

func grpcWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGRPCKeepAlive: with keep-alive a worker's probes share one
// connection, survive a server restart, and Session.Close ends it.
func TestGRPCKeepAlive(t *testing.T) {
	l, hs, stop := healthServer(t, "127.0.0.1:0")
	addr := l.Addr().String()
	_, port := hostPort(t, addr)
	p := New(nil, Options{})
	s := NewSession()
	probe := func() (Result, string) {
		t.Helper()
		res, out, err := p.grpc.probeSession(context.Background(), s, true, "127.0.0.1", "", port, time.Second)
		if err != nil {
			t.Fatalf("probe error: %v", err)
		}
		return res, out
	}
	for i := 0; i < 5; i++ {
		if res, out := probe(); res != Success || out != "service healthy" {
			t.Fatalf("probe %d = %v, %q", i, res, out)
		}
	}
	if n := l.accepted.Load(); n != 1 {
		t.Errorf("%d connections for 5 probes; want 1", n)
	}

	// A non-healthy answer reads as grpc-go's, and the kept connection stays.
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if res, out := probe(); res != Failure || out != `service unhealthy (responded with "NOT_SERVING")` {
		t.Errorf("not serving: %v, %q", res, out)
	}
	if s.grpcState().conn == nil {
		t.Error("kept connection dropped after a clean NOT_SERVING answer")
	}

	// A restarted server: the kept connection is dead, the probe reconnects.
	stop()
	l2, _, _ := healthServer(t, addr)
	if res, out := probe(); res != Success {
		t.Fatalf("after restart: %v, %q", res, out)
	}
	if res, _ := probe(); res != Success || l2.accepted.Load() != 1 {
		t.Errorf("after restart: %v, %d connections; want one kept", res, l2.accepted.Load())
	}

	s.Close()
	grpcWaitFor(t, "the kept connection to close", func() bool { return l2.gone.Load() == l2.accepted.Load() })
	// A closed session keeps nothing: the probe still works, on its own.
	if res, _ := probe(); res != Success {
		t.Errorf("closed session: %v", res)
	}
	grpcWaitFor(t, "the closed session's connection to close", func() bool { return l2.gone.Load() == l2.accepted.Load() })
}

// TestGRPCKeepAliveFlowControl runs more probes on one connection than the
// default 64 KiB receive window holds responses: the window must be returned.
func TestGRPCKeepAliveFlowControl(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	l, _, _ := healthServer(t, "127.0.0.1:0")
	_, port := hostPort(t, l.Addr().String())
	p := New(nil, Options{})
	s := NewSession()
	defer s.Close()
	const n = 65535/7 + 500 // 7 bytes of DATA per response
	for i := 0; i < n; i++ {
		res, out, _ := p.grpc.probeSession(context.Background(), s, true, "127.0.0.1", "", port, time.Second)
		if res != Success {
			t.Fatalf("probe %d: %v, %q", i, res, out)
		}
	}
	if got := l.accepted.Load(); got != 1 {
		t.Errorf("%d connections; want 1", got)
	}
}
