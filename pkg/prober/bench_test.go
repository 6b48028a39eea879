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

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// benchProbeWith runs p as a worker would: one Session for the run.
func benchProbeWith(b *testing.B, p *Prober, spec *v1.Probe, target Target) {
	b.Helper()
	target.Session = NewSession()
	defer target.Session.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, out, err := p.Probe(ctx, probespec.Readiness, spec, target, nil)
		if res != results.Success || err != nil {
			b.Fatalf("Probe = %v, %q, %v", res, out, err)
		}
	}
}

func benchHTTPServer(b *testing.B) int {
	_, _, port := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	return port
}

// BenchmarkHTTPProbe: the shared Transport (--probe-host-policy=kubelet).
func BenchmarkHTTPProbe(b *testing.B) {
	benchProbeWith(b, New(nil, Options{}), httpSpec("/healthz", benchHTTPServer(b)), Target{PodIP: "127.0.0.1"})
}

// BenchmarkHTTPProbeScoped: the default policy, the worker's own Transport
// with its dialer bound to the pod's IPs.
func BenchmarkHTTPProbeScoped(b *testing.B) {
	p := New(nil, Options{HostGuard: guardFor(hostpolicy.DenyNodeLocal)})
	benchProbeWith(b, p, httpSpec("/healthz", benchHTTPServer(b)), Target{PodIP: "127.0.0.1", PodIPs: []string{"127.0.0.1"}})
}

func BenchmarkHTTPProbeKeepAlive(b *testing.B) {
	benchProbeWith(b, New(nil, Options{}), httpSpec("/healthz", benchHTTPServer(b)), Target{PodIP: "127.0.0.1", KeepAlive: true})
}

func BenchmarkTCPProbe(b *testing.B) { benchTCP(b, "") }

func BenchmarkTCPProbeRST(b *testing.B) { benchTCP(b, TCPCloseRST) }

func benchTCP(b *testing.B, mode TCPCloseMode) {
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
	benchProbeWith(b, New(nil, Options{TCPClose: mode}), &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{
		TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}, Target{PodIP: "127.0.0.1"})
}

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

func BenchmarkGRPCProbe(b *testing.B) {
	benchProbeWith(b, New(nil, Options{}), grpcSpec(benchGRPCServer(b), ""), Target{PodIP: "127.0.0.1"})
}

// BenchmarkGRPCProbeKeepAlive reuses one ClientConn (opt-in).
func BenchmarkGRPCProbeKeepAlive(b *testing.B) {
	benchProbeWith(b, New(nil, Options{}), grpcSpec(benchGRPCServer(b), ""), Target{PodIP: "127.0.0.1", KeepAlive: true})
}
