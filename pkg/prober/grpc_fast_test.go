package prober

import (
	"context"
	"net"
	"regexp"
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
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
)

// countingHealth is a gRPC server that counts the calls it receives,
// those to services it does not have included.
func countingHealth(t *testing.T, register func(*grpc.Server)) (port int, calls *atomic.Int32) {
	calls = new(atomic.Int32)
	count := grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) {
		calls.Add(1)
		return ctx, nil
	})
	return startGRPC(t, register, count), calls
}

// loopbackPorts hides the ports in a text: each probe has its own server
// and its own client port.
var loopbackPorts = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)

// TestGRPCFastPathMatchesGRPCGo: for every answer, the fast path's result
// and text are grpc-go's on the same bytes (probeGRPCGo is the kubelet's
// code), and the server sees the request once per probe, as from grpc-go.
// Real grpc-go servers first, then scripted HTTP/2 servers that send both
// clients identical bytes: every grpc-status, bad messages, non-gRPC
// answers, resets, GOAWAYs, garbage, silence, and connections that fail
// before the request (where the fast path hands over to grpc-go).
func TestGRPCFastPathMatchesGRPCGo(t *testing.T) {
	t.Parallel()
	p := New(nil, Options{})
	compare := func(t *testing.T, service string, timeout time.Duration, fastPort, goPort int) (Result, string) {
		t.Helper()
		res, out, err := p.grpc.probe(context.Background(), "127.0.0.1", service, fastPort, timeout)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(goPort))
		wantRes, wantOut, wantErr := p.grpc.probeGRPCGo(context.Background(), addr, service, timeout)
		out, wantOut = loopbackPorts.ReplaceAllString(out, "127.0.0.1:PORT"), loopbackPorts.ReplaceAllString(wantOut, "127.0.0.1:PORT")
		if res != wantRes || out != wantOut || err != wantErr {
			t.Errorf("fast path: %v, %q, %v\ngrpc-go:   %v, %q, %v", res, out, err, wantRes, wantOut, wantErr)
		}
		return res, out
	}

	t.Run("grpc-go servers", func(t *testing.T) {
		t.Parallel()
		register := func(s *grpc.Server) {
			hs := health.NewServer()
			hs.SetServingStatus("ready", healthpb.HealthCheckResponse_SERVING)
			hs.SetServingStatus("draining", healthpb.HealthCheckResponse_NOT_SERVING)
			hs.SetServingStatus("unknown", healthpb.HealthCheckResponse_UNKNOWN)
			hs.SetServingStatus("odd", healthpb.HealthCheckResponse_ServingStatus(7))
			healthpb.RegisterHealthServer(s, hs)
		}
		cases := []struct {
			name     string
			register func(*grpc.Server)
			service  string
		}{
			{"serving, overall", register, ""},
			{"serving, named service", register, "ready"},
			{"not serving", register, "draining"},
			{"status unknown", register, "unknown"},
			{"status outside the enum", register, "odd"},
			{"unknown service", register, "nope"},
			{"no health service", func(*grpc.Server) {}, ""},
			// The server's deadline (our grpc-timeout) and ours end together:
			// either DEADLINE_EXCEEDED comes first, the text is the RPC timeout.
			{"rpc timeout", func(s *grpc.Server) { healthpb.RegisterHealthServer(s, blockingHealth{}) }, ""},
			{"server answers DEADLINE_EXCEEDED", func(s *grpc.Server) { healthpb.RegisterHealthServer(s, &expiredHealth{}) }, ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				fast, fastCalls := countingHealth(t, tc.register)
				slow, slowCalls := countingHealth(t, tc.register)
				compare(t, tc.service, time.Second, fast, slow)
				if f, s := fastCalls.Load(), slowCalls.Load(); f != 1 || s != 1 {
					t.Errorf("the server saw %d checks from the fast path, %d from grpc-go; want 1 each", f, s)
				}
			})
		}
	})

	for _, tc := range scriptedGRPCCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fast, slow := startH2Script(t, tc.script), startH2Script(t, tc.script)
			timeout := time.Second
			if tc.timeout > 0 {
				timeout = tc.timeout
			}
			_, out := compare(t, "", timeout, fast.port, slow.port)
			t.Logf("%s", out)
			if f, s := fast.requests.Load(), slow.requests.Load(); f != int32(tc.requests) || s != int32(tc.requests) {
				t.Errorf("the server saw %d checks from the fast path, %d from grpc-go; want %d each", f, s, tc.requests)
			}
			// One connection per request sent: the fast path did not hand a
			// written request over to grpc-go (which would connect again).
			if tc.conns > 0 && fast.conns.Load() != int32(tc.conns) {
				t.Errorf("the fast path made %d connections; want %d", fast.conns.Load(), tc.conns)
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
	if res, out, _ := p.grpc.probe(ctx, "127.0.0.1", "", port, time.Second); res != Success {
		t.Fatalf("fast path: %v, %q", res, out)
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

// TestDecodeHealthResponse: the allocation-free reading of common
// responses agrees with protobuf's, which reads the rest.
func TestDecodeHealthResponse(t *testing.T) {
	for _, msg := range [][]byte{
		{0x08, 1},
		{0x08, 2},
		{},                                   // UNKNOWN by omission
		{0x12, 1, 'x', 0x08, 1},              // an unknown field first
		{0x08, 2, 0x08, 1},                   // the last one wins
		{0x08, 7},                            // not in the enum
		{0x08, 0x80, 0x01},                   // a longer varint
		{0x08, 0xff, 0xff, 0xff, 0xff, 0x0f}, // -1 as an int32
		{0x08, 0x81},                         // truncated varint
		{0x0a, 1, 'x'},                       // field 1 with the wrong wire type
		{0x08},                               // a tag and no value
	} {
		got, err := decodeHealthResponse(msg)
		var want healthpb.HealthCheckResponse
		wantErr := proto.Unmarshal(msg, &want)
		if (err != nil) != (wantErr != nil) || err == nil && got != int32(want.GetStatus()) {
			t.Errorf("decodeHealthResponse(%x) = %v, %v; protobuf gives %v, %v", msg, got, err, want.GetStatus(), wantErr)
		}
	}
}
