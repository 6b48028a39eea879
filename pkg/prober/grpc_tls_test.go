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
// verifying its certificate (one connection per probe), and with
// keep-alive; a mode that does not match the server fails with the
// kubelet's connect timeout.
func TestGRPCTLS(t *testing.T) {
	grpcSpec := func(port int, useTLS bool) *v1.Probe {
		g := &v1.GRPCAction{Port: int32(port)}
		if useTLS {
			mode := v1.GRPCProbeModeTLS
			g.Mode = &mode
		}
		return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: g}}
	}
	p := New(nil, Options{})
	run := func(port int, useTLS, keep bool, s *Session) (Result, string) {
		t.Helper()
		res, out, err := p.runOnce(context.Background(), grpcSpec(port, useTLS), Target{PodIP: "127.0.0.1", KeepAlive: keep, Session: s})
		if err != nil {
			t.Fatalf("error: %v", err)
		}
		return res, out
	}

	t.Run("serving", func(t *testing.T) {
		port, cl := startHealth(t, true, healthpb.HealthCheckResponse_SERVING)
		before := cl.n.Load()
		if res, out := run(port, true, false, nil); res != Success || out != "service healthy" {
			t.Fatalf("%v %q; want Success", res, out)
		}
		if n := cl.n.Load() - before; n != 1 {
			t.Errorf("%d connections for one probe; want 1", n)
		}
	})

	t.Run("not serving", func(t *testing.T) {
		port, _ := startHealth(t, true, healthpb.HealthCheckResponse_NOT_SERVING)
		if res, out := run(port, true, false, nil); res != Failure || out != `service unhealthy (responded with "NOT_SERVING")` {
			t.Errorf("%v %q; want the unhealthy failure", res, out)
		}
	})

	t.Run("keep-alive over TLS", func(t *testing.T) {
		port, cl := startHealth(t, true, healthpb.HealthCheckResponse_SERVING)
		s := NewSession()
		defer s.Close()
		for range 5 {
			if res, out := run(port, true, true, s); res != Success {
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
			res, out := run(port, tc.useTLS, false, nil)
			want := fmt.Sprintf("timeout: failed to connect service %q within 1s", fmt.Sprintf("127.0.0.1:%d", port))
			if res != Failure || !strings.HasPrefix(out, want) {
				t.Errorf("%v %q; want Failure %q...", res, out, want)
			}
		})
	}
}
