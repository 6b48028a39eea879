package prober

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/probed-dev/probed/pkg/results"
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

// TestGRPCKeepAliveReplaceBoundary: a kept connection that fails is
// replaced within the probe only when nothing at all came back for the
// request: the server had dropped it while idle, sent a GOAWAY that leaves
// the request out or refused the stream (grpc-go's transparent retry), or
// read the request and hung up without a word, which looks the same as an
// idle drop. Once anything for the request arrived, the failure is the
// probe's outcome, in grpc-go's words, and the request is not sent again.
func TestGRPCKeepAliveReplaceBoundary(t *testing.T) {
	const eof = "error: health rpc probe failed: rpc error: code = Unavailable desc = error reading from server: EOF"
	cases := []struct {
		name string
		// idle runs on the first connection right after the first answer;
		// second answers the second request there.
		idle, second func(w *h2Writer, id uint32) scriptEnd
		wantOut      string
		requests     int32 // checks the server read
		conns        int32
	}{
		{name: "dropped while idle", idle: hangUp, wantOut: "service healthy", requests: 2, conns: 2},
		{name: "GOAWAY while idle", idle: func(w *h2Writer, id uint32) scriptEnd {
			_ = w.fr.WriteGoAway(id, http2.ErrCodeNo, nil)
			return scriptHangUp
		}, wantOut: "service healthy", requests: 2, conns: 2},
		{name: "refused", second: func(w *h2Writer, id uint32) scriptEnd {
			_ = w.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
			return scriptOn
		}, wantOut: "service healthy", requests: 3, conns: 1},
		{name: "read, then hung up", second: hangUp, wantOut: "service healthy", requests: 3, conns: 2},
		{name: "read, then reset", second: func(*h2Writer, uint32) scriptEnd { return scriptReset }, wantOut: "service healthy", requests: 3, conns: 2},
		{name: "headers, then closed", second: func(w *h2Writer, id uint32) scriptEnd {
			w.grpcOK(id)
			return scriptClose
		}, wantOut: eof, requests: 2, conns: 1},
		{name: "GOAWAY keeping the request, then closed", second: func(w *h2Writer, id uint32) scriptEnd {
			_ = w.fr.WriteGoAway(id, http2.ErrCodeNo, nil)
			return scriptClose
		}, wantOut: `error: health rpc probe failed: rpc error: code = Unavailable desc = closing transport due to: connection error: desc = "error reading from server: EOF", received prior goaway: code: NO_ERROR`, requests: 2, conns: 1},
		{name: "RST_STREAM", second: func(w *h2Writer, id uint32) scriptEnd {
			_ = w.fr.WriteRSTStream(id, http2.ErrCodeInternal)
			return scriptOn
		}, wantOut: "error: health rpc probe failed: rpc error: code = Internal desc = stream terminated by RST_STREAM with error code: INTERNAL_ERROR", requests: 2, conns: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var srv *h2ScriptServer
			srv = startH2Script(t, h2Script{answer: func(w *h2Writer, id uint32, n int) scriptEnd {
				first := srv.conns.Load() == 1
				if first && n == 2 && tc.second != nil {
					return tc.second(w, id)
				}
				w.answer(id, grpcMsg(0x08, 1), "0")
				if first && n == 1 && tc.idle != nil {
					return tc.idle(w, id)
				}
				return scriptOn
			}})
			p := New(nil, Options{})
			s := NewSession()
			defer s.Close()
			probe := func() string {
				t.Helper()
				res, out, err := p.grpc.probeSession(context.Background(), s, true, "127.0.0.1", "", srv.port, time.Second)
				if err != nil || (res == Success) != (out == "service healthy") {
					t.Fatalf("probe: %v, %q, %v", res, out, err)
				}
				return out
			}
			if out := probe(); out != "service healthy" {
				t.Fatalf("first probe: %q", out)
			}
			if tc.idle != nil {
				grpcWaitFor(t, "the server to drop the idle connection", func() bool { return srv.closed.Load() == 1 })
			}
			if out := probe(); out != tc.wantOut {
				t.Errorf("second probe: %q; want %q", out, tc.wantOut)
			}
			if got := srv.requests.Load(); got != tc.requests {
				t.Errorf("the server read %d checks; want %d", got, tc.requests)
			}
			if got := srv.conns.Load(); got != tc.conns {
				t.Errorf("%d connections; want %d", got, tc.conns)
			}
		})
	}
}

func hangUp(*h2Writer, uint32) scriptEnd { return scriptHangUp }

// TestGRPCFastPathsOff: with DisableFastPaths every probe is grpc-go's
// (which says GOAWAY when it closes, the fast path never does), with the
// same outcome.
func TestGRPCFastPathsOff(t *testing.T) {
	t.Parallel()
	script := h2Script{answer: func(w *h2Writer, id uint32, _ int) scriptEnd {
		w.answer(id, grpcMsg(0x08, 2), "0")
		return scriptOn
	}}
	for _, off := range []bool{false, true} {
		srv := startH2Script(t, script)
		p := New(nil, Options{DisableFastPaths: off})
		res, out, err := p.Probe(context.Background(), Readiness, grpcSpec(srv.port, ""), Target{PodIP: "127.0.0.1"}, nil)
		if err != nil || res != results.Failure || out != `service unhealthy (responded with "NOT_SERVING")` {
			t.Errorf("fast paths off=%v: %v, %q, %v", off, res, out, err)
		}
		grpcWaitFor(t, "the probe's connection to close", func() bool { return srv.closed.Load() == srv.conns.Load() })
		if grpcGo := srv.goAway.Load() > 0; grpcGo != off {
			t.Errorf("fast paths off=%v: the probe went through grpc-go: %v", off, grpcGo)
		}
		if n := srv.requests.Load(); n != 1 {
			t.Errorf("fast paths off=%v: %d checks; want 1", off, n)
		}
	}
}
