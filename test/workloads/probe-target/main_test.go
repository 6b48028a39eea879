package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealthzFailsAfterAndOnFile(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "fail")
	tg := &target{cfg: config{healthzFailAfter: time.Hour, failFile: flag}, started: time.Now()}
	srv := httptest.NewServer(tg.mux())
	defer srv.Close()
	if code, _ := get(t, srv, "/healthz"); code != 200 {
		t.Fatalf("healthy: %d", code)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, srv, "/healthz"); code != 500 {
		t.Fatalf("fail file: %d", code)
	}
	os.Remove(flag)
	tg.started = time.Now().Add(-2 * time.Hour)
	if code, body := get(t, srv, "/healthz"); code != 500 || !strings.Contains(body, "after start") {
		t.Fatalf("after fail-after: %d %q", code, body)
	}
	tg.cfg.healthzFailAfter = 0
	if code, _ := get(t, srv, "/healthz"); code != 200 {
		t.Fatalf("healthy again: %d", code)
	}
	resp, err := srv.Client().Post(srv.URL+"/fail", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code, _ := get(t, srv, "/healthz"); code != 500 {
		t.Fatalf("after POST /fail: %d", code)
	}
}

func TestReadyzFlipsAndWarmsUp(t *testing.T) {
	tg := &target{cfg: config{readyAfter: time.Minute, readyFlip: 20 * time.Second}, started: time.Now()}
	srv := httptest.NewServer(tg.mux())
	defer srv.Close()
	for _, c := range []struct {
		up   time.Duration
		code int
	}{{0, 503}, {61 * time.Second, 200}, {81 * time.Second, 503}, {101 * time.Second, 200}} {
		tg.started = time.Now().Add(-c.up)
		if code, body := get(t, srv, "/readyz"); code != c.code {
			t.Errorf("up %v: %d %q, want %d", c.up, code, body, c.code)
		}
	}
	tg.terminating.Store(true)
	if code, _ := get(t, srv, "/readyz"); code != 503 {
		t.Errorf("terminating: %d", code)
	}
}

// The non-local redirect body is what the kubelet quotes in its ProbeWarning.
func TestRedirect(t *testing.T) {
	tg := &target{started: time.Now()}
	srv := httptest.NewServer(tg.mux())
	defer srv.Close()
	code, body := get(t, srv, "/redirect?loc="+"http%3A%2F%2F0.0.0.0%2F")
	if code != http.StatusFound || !strings.Contains(body, `<a href="http://0.0.0.0/">Found</a>.`) {
		t.Fatalf("%d %q", code, body)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(srv.URL + "/redirect?loc=%2Fhealthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/healthz" {
		t.Fatalf("local redirect ended at %s with %d", resp.Request.URL, resp.StatusCode)
	}
}

func TestGRPCHealthMirrorsHTTP(t *testing.T) {
	tg := &target{cfg: config{readyAfter: time.Hour}, started: time.Now()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go tg.syncGRPCHealth(hs)
	go s.Serve(ln)
	defer s.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	check := func(svc string) healthpb.HealthCheckResponse_ServingStatus {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status
	}
	deadline := time.Now().Add(5 * time.Second)
	for check("") != healthpb.HealthCheckResponse_SERVING || check("ready") != healthpb.HealthCheckResponse_NOT_SERVING {
		if time.Now().After(deadline) {
			t.Fatalf("service \"\" %v, \"ready\" %v", check(""), check("ready"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestH2CAndHTTP1OnOneListener: with --h2c a prior-knowledge HTTP/2 client
// and an HTTP/1.1 client both get /healthz; without it the h2c client fails,
// as an HTTP/1.1-only server must for upstream's "HTTP2 against HTTP/1.1
// server" scenario.
func TestH2CAndHTTP1OnOneListener(t *testing.T) {
	for _, h2c := range []bool{true, false} {
		tg := &target{cfg: config{h2c: h2c}, started: time.Now()}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := tg.httpServer()
		go srv.Serve(ln)
		url := "http://" + ln.Addr().String() + "/healthz"

		h1, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
		if err != nil || h1.StatusCode != 200 || h1.ProtoMajor != 1 {
			t.Errorf("h2c=%v: HTTP/1.1 GET: %v %v", h2c, h1, err)
		}
		if h1 != nil {
			h1.Body.Close()
		}
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		h2, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(url)
		if h2c && (err != nil || h2.StatusCode != 200 || h2.ProtoMajor != 2) {
			t.Errorf("h2c server: prior-knowledge HTTP/2 GET: %v %v", h2, err)
		}
		if !h2c && err == nil {
			t.Errorf("HTTP/1.1-only server answered a prior-knowledge HTTP/2 GET: %v %s", h2.Status, h2.Proto)
		}
		if h2 != nil {
			h2.Body.Close()
		}
		tr.CloseIdleConnections()
		srv.Close()
	}
}

// TestGRPCOverTLS: with --grpc-tls the health server answers over TLS and
// refuses a plaintext client.
func TestGRPCOverTLS(t *testing.T) {
	tg := &target{cfg: config{grpcTLS: true}, started: time.Now()}
	srv, err := tg.grpcServer()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	check := func(creds grpc.DialOption) (healthpb.HealthCheckResponse_ServingStatus, error) {
		conn, err := grpc.NewClient(ln.Addr().String(), creds)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return 0, err
		}
		return resp.Status, nil
	}
	// The first sync may not have run yet: poll for SERVING.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := check(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
		if err == nil && st == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS health check: %v %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, err := check(grpc.WithTransportCredentials(insecure.NewCredentials())); err == nil {
		t.Fatalf("plaintext client got %v from a TLS server", st)
	}
}
