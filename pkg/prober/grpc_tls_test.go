package prober

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
)

// selfSignedCert is a certificate for a name no probe dials, so that only
// a client that skips verification gets through.
func selfSignedCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "not-the-pod.example"},
		DNSNames:     []string{"not-the-pod.example"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// acceptCounter counts the connections it accepts.
type acceptCounter struct {
	net.Listener
	n atomic.Int64
}

func (l *acceptCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// startHealth serves a real gRPC health server on loopback, over TLS when
// tlsOn, and returns its port and accept counter.
func startHealth(t *testing.T, tlsOn bool, st healthpb.HealthCheckResponse_ServingStatus) (int, *acceptCounter) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &acceptCounter{Listener: l}
	var opts []grpc.ServerOption
	if tlsOn {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{selfSignedCert(t)}})))
	}
	s := grpc.NewServer(opts...)
	hs := health.NewServer()
	hs.SetServingStatus("", st)
	healthpb.RegisterHealthServer(s, hs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(cl)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	_, port := hostPort(t, l.Addr().String())
	return port, cl
}

// TestGRPCTLS: grpc.mode TLS reaches a real TLS health server without
// verifying its certificate, on the fast path (one connection per probe:
// no fallback to grpc-go), with keep-alive, and through grpc-go; a mode
// that does not match the server fails with the same text on both paths.
func TestGRPCTLS(t *testing.T) {
	grpcSpec := func(port int) *v1.Probe {
		return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port)}}}
	}
	fast, slow := New(nil, Options{}), New(nil, Options{DisableFastPaths: true})
	run := func(p *Prober, port int, useTLS, keep bool, s *Session) (Result, string) {
		t.Helper()
		res, out, err := p.runOnce(context.Background(), grpcSpec(port), Target{PodIP: "127.0.0.1", GRPCTLS: useTLS, KeepAlive: keep, Session: s})
		if err != nil {
			t.Fatalf("error: %v", err)
		}
		return res, out
	}

	t.Run("serving", func(t *testing.T) {
		port, cl := startHealth(t, true, healthpb.HealthCheckResponse_SERVING)
		for i, p := range []*Prober{fast, slow} {
			before := cl.n.Load()
			if res, out := run(p, port, true, false, nil); res != Success || out != "service healthy" {
				t.Fatalf("prober %d: %v %q; want Success", i, res, out)
			}
			if n := cl.n.Load() - before; n != 1 {
				t.Errorf("prober %d: %d connections for one probe; want 1", i, n)
			}
		}
	})

	t.Run("not serving", func(t *testing.T) {
		port, _ := startHealth(t, true, healthpb.HealthCheckResponse_NOT_SERVING)
		for i, p := range []*Prober{fast, slow} {
			if res, out := run(p, port, true, false, nil); res != Failure || out != `service unhealthy (responded with "NOT_SERVING")` {
				t.Errorf("prober %d: %v %q; want the unhealthy failure", i, res, out)
			}
		}
	})

	t.Run("keep-alive over TLS", func(t *testing.T) {
		port, cl := startHealth(t, true, healthpb.HealthCheckResponse_SERVING)
		s := NewSession()
		defer s.Close()
		for range 5 {
			if res, out := run(fast, port, true, true, s); res != Success {
				t.Fatalf("%v %q", res, out)
			}
		}
		if n := cl.n.Load(); n != 1 {
			t.Errorf("%d connections for 5 kept-alive probes; want 1", n)
		}
	})

	// A mismatch: grpc-go retries the connection until the timeout.
	for _, tc := range []struct {
		name              string
		serverTLS, useTLS bool
	}{
		{"plaintext probe, TLS server", true, false},
		{"TLS probe, plaintext server", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, _ := startHealth(t, tc.serverTLS, healthpb.HealthCheckResponse_SERVING)
			fr, fo := run(fast, port, tc.useTLS, false, nil)
			sr, so := run(slow, port, tc.useTLS, false, nil)
			want := fmt.Sprintf("timeout: failed to connect service %q within 1s", fmt.Sprintf("127.0.0.1:%d", port))
			if fr != Failure || sr != Failure || !strings.HasPrefix(fo, want) || fo != so {
				t.Errorf("fast %v %q, grpc-go %v %q; want both Failure %q...", fr, fo, sr, so, want)
			}
		})
	}
}
