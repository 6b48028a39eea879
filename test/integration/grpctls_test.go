//go:build integration

package integration

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
)

// startTLSGRPCTarget is a real gRPC health server over TLS, with a
// self-signed certificate for a name no probe dials.
func startTLSGRPCTarget(t *testing.T, ip string) *grpcTarget {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("not-the-pod.test", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return &grpcTarget{IP: ip, Port: ln.Addr().(*net.TCPAddr).Port, hs: hs}
}

// startHTTPSTarget is a real HTTPS server on ip answering 200, with a
// certificate for name (not the IP); caPEM verifies it.
func startHTTPSTarget(t *testing.T, ip, name string) (port int, caPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(ip, "0"), &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, certPEM
}

// TestGRPCModeTLS: upstream's grpc.mode TLS probes a real TLS gRPC health
// server (its certificate unverified) on the real apiserver; a plaintext
// probe of it fails, and an unknown mode is an InvalidProbe naming
// grpc.mode.
func TestGRPCModeTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ip := loopbackIP()
	g := startTLSGRPCTarget(t, ip)
	probe := func(mode string) map[string]any {
		grpcAction := map[string]any{"port": g.Port}
		if mode != "" {
			grpcAction["mode"] = mode
		}
		return map[string]any{"grpc": grpcAction, "periodSeconds": 1, "failureThreshold": 1}
	}
	tlsPod := e.createPod("tls", mustJSON(probes{"app": {"readinessProbe": probe("TLS")}}), true, container{name: "app"})
	e.runPod(tlsPod, ip, time.Minute)
	plainPod := e.createPod("plain", mustJSON(probes{"app": {"readinessProbe": probe("")}}), true, container{name: "app"})
	e.runPod(plainPod, ip, time.Minute)
	badPod := e.createPod("badmode", mustJSON(probes{"app": {"readinessProbe": probe("Verify")}}), true, container{name: "app"})
	e.runPod(badPod, ip, time.Minute)
	e.startProbed()

	e.waitCond("tls", "ready.probed.io/app", v1.ConditionTrue, 20*time.Second)
	g.Set(false)
	e.waitCond("tls", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
	if c := condition(e.pod("tls"), "ready.probed.io/app"); !strings.Contains(c.Message, `service unhealthy (responded with "NOT_SERVING")`) {
		t.Errorf("condition = %+v; want the health answer, read over TLS", c)
	}

	e.waitCond("plain", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
	eventually(t, "the plaintext probe's failure", 20*time.Second, func() bool {
		c := condition(e.pod("plain"), "ready.probed.io/app")
		return c != nil && c.Reason == "ProbeFailed" && strings.Contains(c.Message, "failed to connect service")
	})

	e.waitCond("badmode", "ready.probed.io/app", v1.ConditionFalse, 20*time.Second)
	eventually(t, "InvalidProbe event", 20*time.Second, func() bool {
		return e.findEvent(badPod.UID, "InvalidProbe", `grpc.mode: Unsupported value: "Verify"`) != nil
	})
}
