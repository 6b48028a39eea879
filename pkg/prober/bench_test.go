package prober

import (
	"context"
	"net"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/results"
)

func benchProbe(b *testing.B, spec *v1.Probe) {
	b.Helper()
	benchProbeWith(b, New(nil, Options{}), spec, Target{PodIP: "127.0.0.1"})
}

// benchProbeWith runs p as a worker would: one Session for the run.
func benchProbeWith(b *testing.B, p *Prober, spec *v1.Probe, target Target) {
	b.Helper()
	target.Session = NewSession()
	defer target.Session.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, out, err := p.Probe(ctx, Readiness, spec, target, nil)
		if res != results.Success || err != nil {
			b.Fatalf("Probe = %v, %q, %v", res, out, err)
		}
	}
}

func BenchmarkHTTPProbe(b *testing.B) {
	_, _, port := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	benchProbe(b, httpSpec("/healthz", port))
}

// BenchmarkHTTPProbeNetHTTP is the net/http path alone (the old one).
func BenchmarkHTTPProbeNetHTTP(b *testing.B) {
	_, _, port := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	p := New(nil, Options{})
	p.http.noFast = true
	benchProbeWith(b, p, httpSpec("/healthz", port), Target{PodIP: "127.0.0.1"})
}

// BenchmarkHTTPProbeHandover: a chunked answer, which the fast path hands
// over to net/http on its connection; ...NetHTTP is the same without it.
func BenchmarkHTTPProbeHandover(b *testing.B) { benchChunked(b, false) }

func BenchmarkHTTPProbeHandoverNetHTTP(b *testing.B) { benchChunked(b, true) }

func benchChunked(b *testing.B, noFast bool) {
	_, _, port := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
		w.(http.Flusher).Flush() // no Content-Length: the body is chunked
	}))
	p := New(nil, Options{DisableFastPaths: noFast})
	benchProbeWith(b, p, httpSpec("/healthz", port), Target{PodIP: "127.0.0.1"})
}

func BenchmarkHTTPProbeKeepAlive(b *testing.B) {
	_, _, port := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	benchProbeWith(b, New(nil, Options{}), httpSpec("/healthz", port), Target{PodIP: "127.0.0.1", KeepAlive: true})
}

func BenchmarkTCPProbe(b *testing.B) { benchTCP(b, "") }

func BenchmarkTCPProbeRST(b *testing.B) { benchTCP(b, TCPCloseRST) }

// BenchmarkTCPProbeLinger1s is the kubelet's close: SO_LINGER 1s, a close(2) that waits.
func BenchmarkTCPProbeLinger1s(b *testing.B) {
	p := New(nil, Options{})
	p.tcp.dialer = newProbeDialer()
	benchTCPWith(b, p)
}

func benchTCP(b *testing.B, mode TCPCloseMode) {
	benchTCPWith(b, New(nil, Options{TCPClose: mode}))
}

func benchTCPWith(b *testing.B, p *Prober) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	b.Cleanup(func() { _ = l.Close(); <-done })
	_, port := hostPort(b, l.Addr().String())
	benchProbeWith(b, p, &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{
		TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}, Target{PodIP: "127.0.0.1"})
}

func BenchmarkGRPCProbe(b *testing.B) {
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
	benchProbe(b, &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{
		GRPC: &v1.GRPCAction{Port: int32(port)}}})
}
