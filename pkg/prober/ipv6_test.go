package prober

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probed-dev/probed/pkg/probespec"
	"github.com/probed-dev/probed/pkg/results"
)

// TestIPv6PodIP runs each network probe against [::1]: the pod IP must be
// bracketed when joined with the port. A chunked answer is still one
// request.
func TestIPv6PodIP(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	var chunkedReqs atomic.Int32
	s := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("v6"))
		if r.URL.Path == "/chunked" {
			chunkedReqs.Add(1)
			w.(http.Flusher).Flush()
		}
	})}}
	s.Start()
	defer s.Close()
	_, httpPort := hostPort(t, l.Addr().String())

	gl, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(gl) }()
	defer func() { hs.Shutdown(); gs.Stop(); <-done }()
	_, grpcPort := hostPort(t, gl.Addr().String())

	specs := map[string]*v1.Probe{
		"http":         httpSpec("/", httpPort),
		"http chunked": httpSpec("/chunked", httpPort),
		"tcp": {TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{
			TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(httpPort))}}},
		"grpc": grpcSpec(grpcPort, ""),
	}
	p := New(nil, Options{})
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			res, out, err := p.Probe(context.Background(), probespec.Readiness, spec, Target{PodIP: "::1"}, nil)
			if res != results.Success || err != nil {
				t.Errorf("Probe = %v, %q, %v", res, out, err)
			}
		})
	}
	if n := chunkedReqs.Load(); n != 1 {
		t.Errorf("%d requests for the chunked probe; want 1", n)
	}
}
