package prober

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
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
)

// closingListener accepts connections, reads a little and closes them.
func closingListener(t *testing.T) int {
	return acceptLoopback(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 64))
		_ = c.Close()
	})
}

// TestGRPCFastPathMatchesGRPCGo: the fast path answers only SERVING, and
// with the fallback every outcome is grpc-go's alone, word for word.
func TestGRPCFastPathMatchesGRPCGo(t *testing.T) {
	t.Parallel()
	hs := health.NewServer()
	hs.SetServingStatus("ready", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("draining", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus("unknown", healthpb.HealthCheckResponse_UNKNOWN)
	hs.SetServingStatus("odd", healthpb.HealthCheckResponse_ServingStatus(7))
	healthy := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	t.Cleanup(hs.Shutdown)
	noHealth := startGRPC(t, func(*grpc.Server) {})
	blocking := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, blockingHealth{}) })
	expired := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, &expiredHealth{}) })
	closing := closingListener(t)
	silent := silentListener(t)

	// fastAnswer: the fast path words the answer itself, with no fallback.
	// eitherWay: the server's deadline (from our grpc-timeout) and ours end
	// together, so its DEADLINE_EXCEEDED may or may not arrive first; the
	// text is the RPC timeout either way.
	cases := []struct {
		name        string
		port        int
		service     string
		fastHealthy bool
		fastAnswer  bool
		eitherWay   bool
	}{
		{"serving, overall", healthy, "", true, true, false},
		{"serving, named service", healthy, "ready", true, true, false},
		{"not serving", healthy, "draining", false, true, false},
		{"status unknown", healthy, "unknown", false, true, false},
		{"status outside the enum", healthy, "odd", false, true, false},
		{"unknown service", healthy, "nope", false, false, false},
		{"no health service", noHealth, "", false, false, false},
		{"rpc timeout", blocking, "", false, false, true},
		{"server answers DEADLINE_EXCEEDED", expired, "", false, true, false},
		{"server closes the connection", closing, "", false, false, false},
		{"silent listener", silent, "", false, false, false},
	}
	p := New(nil, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tc.port))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			healthy, _, err := p.grpc.fastCheck(ctx, nil, false, addr, tc.service)
			cancel()
			if healthy != tc.fastHealthy {
				t.Errorf("fast path healthy = %v (%v); want %v", healthy, err, tc.fastHealthy)
			}
			var ua unhealthyAnswer
			if answered := healthy || errors.As(err, &ua) || errors.Is(err, errRPCDeadline); answered != tc.fastAnswer && !tc.eitherWay {
				t.Errorf("fast path answered = %v (%v); want %v", answered, err, tc.fastAnswer)
			}
			res, out, err := p.grpc.probe(context.Background(), "127.0.0.1", tc.service, tc.port, time.Second)
			wantRes, wantOut, wantErr := p.grpc.probeGRPCGo(context.Background(), addr, tc.service, time.Second)
			if res != wantRes || out != wantOut || err != wantErr {
				t.Errorf("probe = %v, %q, %v; grpc-go alone gives %v, %q, %v", res, out, err, wantRes, wantOut, wantErr)
			}
		})
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
// kubelet's RPC timeout, read off the fast path without asking grpc-go: the
// answer can come a moment before our own deadline, with no time left for a
// second connection (a fallback then read as a connect timeout).
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

// TestGRPCFastPathHeaders: the server sees the same authority, user agent
// and content type from the fast path as from grpc-go, and a deadline.
func TestGRPCFastPathHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []metadata.MD
	record := grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if _, ok := ctx.Deadline(); !ok {
			md = md.Copy()
			md.Set("no-deadline", "true")
		}
		mu.Lock()
		seen = append(seen, md)
		mu.Unlock()
		return h(ctx, req)
	})
	hs := health.NewServer()
	port := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) }, record)
	t.Cleanup(hs.Shutdown)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	p := New(nil, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if healthy, _, err := p.grpc.fastCheck(ctx, nil, false, addr, ""); !healthy {
		t.Fatalf("fast path: not healthy: %v", err)
	}
	if res, out, _ := p.grpc.probeGRPCGo(ctx, addr, "", time.Second); res != Success {
		t.Fatalf("grpc-go: %v, %q", res, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d calls recorded; want 2", len(seen))
	}
	for _, k := range []string{":authority", "user-agent", "content-type", "no-deadline"} {
		if fast, slow := seen[0].Get(k), seen[1].Get(k); !slices.Equal(fast, slow) {
			t.Errorf("%s: fast path sent %q, grpc-go %q", k, fast, slow)
		}
	}
	if got := seen[0].Get(":authority"); len(got) != 1 || got[0] != addr {
		t.Errorf(":authority = %q; want %q", got, addr)
	}
}

func TestEncodeGRPCTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                        "0n",
		-time.Second:             "0n",
		time.Millisecond:         "1000000n",
		time.Second:              "1000000u",
		999*time.Millisecond + 1: "999001u",
		3 * time.Minute:          "180000m",
		200 * time.Hour:          "720000S",
	} {
		if got := string(encodeGRPCTimeout(nil, d)); got != want {
			t.Errorf("encodeGRPCTimeout(%v) = %q; want %q", d, got, want)
		}
	}
}

func TestServingDecode(t *testing.T) {
	for _, tc := range []struct {
		msg  []byte
		want uint64
		ok   bool
	}{
		{[]byte{0, 0, 0, 0, 2, 0x08, 1}, 1, true},
		{[]byte{0, 0, 0, 0, 2, 0x08, 2}, 2, true},               // NOT_SERVING
		{[]byte{0, 0, 0, 0, 0}, 0, true},                        // UNKNOWN by omission
		{[]byte{0, 0, 0, 0, 5, 0x12, 1, 'x', 0x08, 1}, 1, true}, // an unknown field first
		{[]byte{0, 0, 0, 0, 4, 0x08, 2, 0x08, 1}, 1, true},      // the last one wins
		{[]byte{0, 0, 0, 0, 2, 0x08, 7}, 7, true},               // not in the enum
		{[]byte{1, 0, 0, 0, 2, 0x08, 1}, 0, false},              // compressed
		{[]byte{0, 0, 0, 0, 3, 0x08, 1}, 0, false},              // short
		{[]byte{0, 0, 0, 0, 2, 0x08, 0x81}, 0, false},           // truncated varint
	} {
		if got, ok := servingStatus(tc.msg); got != tc.want || ok != tc.ok {
			t.Errorf("servingStatus(%x) = %v, %v; want %v, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}
