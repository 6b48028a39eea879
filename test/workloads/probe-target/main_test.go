package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// testCA is a CA that issues the TLS tests' certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate and key, PEM-encoded: for a server
// (dnsName set) or a client.
func (ca *testCA) issue(t *testing.T, cn, dnsName string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if dnsName != "" {
		tmpl.DNSNames, tmpl.ExtKeyUsage = []string{dnsName}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}

// clientCert is ca's client certificate cn, for a tls.Config.
func (ca *testCA) clientCert(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	c, k := ca.issue(t, cn, "")
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

const testServerName = "probe-target.tls.test"

// secretVolume writes files into dir as the kubelet's atomic writer lays
// out a Secret volume: a timestamped directory holds them, ..data points at
// it, and each name is a link through ..data. Called again, it swaps ..data
// to a new directory in one rename, as the kubelet does on an update.
func secretVolume(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	ts, err := os.MkdirTemp(dir, "..ts_")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(ts, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// caMaterial is a CA's files for a Secret: ca.crt and the server's
// tls.crt and tls.key.
func caMaterial(t *testing.T, ca *testCA, serverCN string) map[string][]byte {
	c, k := ca.issue(t, serverCN, testServerName)
	return map[string][]byte{"ca.crt": ca.pem, "tls.crt": c, "tls.key": k}
}

// logLines records what certDir logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) count(sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, sub) {
			n++
		}
	}
	return n
}

// waitLogged waits up to 5 seconds for n lines containing sub.
func (l *logLines) waitLogged(t *testing.T, sub string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.count(sub) < n {
		if time.Now().After(deadline) {
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Errorf("logged %q fewer than %d times: %q", sub, n, l.lines)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logWriter makes logs an io.Writer, for http.Server's ErrorLog (the
// handshakes it refused).
type logWriter struct{ *logLines }

func (w logWriter) Write(b []byte) (int, error) {
	w.logf("%s", strings.TrimSpace(string(b)))
	return len(b), nil
}

// startHTTPS starts tg's --https listener on loopback and returns its
// address; logs gets what probe-target logs, and the handshakes refused.
func startHTTPS(t *testing.T, tg *target, logs *logLines) string {
	t.Helper()
	if err := tg.setupTLS(); err != nil {
		t.Fatal(err)
	}
	tg.certs.logf = logs.logf
	cfg, err := tg.serverTLS("HTTPS", []string{"h2", "http/1.1"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: tg.mux(), ErrorLog: log.New(logWriter{logs}, "", 0)}
	go srv.Serve(tls.NewListener(ln, cfg))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// clientTLS trusts roots for testServerName and presents cert, if any,
// whatever CAs the server names (Go's client otherwise sends none that
// does not chain to them).
func clientTLS(roots *testCA, cert *tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(roots.cert)
	c := &tls.Config{RootCAs: pool, ServerName: testServerName}
	if cert != nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return c
}

// httpsGet GETs /healthz over a new connection (a new handshake) and
// returns the server certificate's CN.
func httpsGet(addr string, roots *testCA, cert *tls.Certificate) (string, error) {
	tr := &http.Transport{DisableKeepAlives: true, ForceAttemptHTTP2: true, TLSClientConfig: clientTLS(roots, cert)}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + addr + "/healthz")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.TLS.PeerCertificates[0].Subject.CommonName, nil
}

// TestTLSDirFollowsTheSecret: --https serves --tls-dir's certificate, and
// after the kubelet-style ..data swap the next handshake gets the new one,
// which a client of the old CA refuses. A swap to a bad certificate keeps
// the last good one, and says so once.
func TestTLSDirFollowsTheSecret(t *testing.T) {
	dir := t.TempDir()
	one, two := newTestCA(t, "ca-one"), newTestCA(t, "ca-two")
	secretVolume(t, dir, caMaterial(t, one, "server-one"))
	logs := &logLines{}
	addr := startHTTPS(t, &target{cfg: config{httpsAddr: "x", tlsDir: dir}, started: time.Now()}, logs)

	if cn, err := httpsGet(addr, one, nil); err != nil || cn != "server-one" {
		t.Fatalf("before the swap: server %q, %v; want server-one", cn, err)
	}
	secretVolume(t, dir, caMaterial(t, two, "server-two"))
	if cn, err := httpsGet(addr, two, nil); err != nil || cn != "server-two" {
		t.Fatalf("after the swap: server %q, %v; want server-two", cn, err)
	}
	if _, err := httpsGet(addr, one, nil); err == nil || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
		t.Errorf("a client of CA one after the swap: %v, want x509's unknown authority", err)
	}
	if n := logs.count(`changed: serving certificate "server-two"`); n != 1 {
		t.Errorf("logged the reload %d times, want once: %q", n, logs.lines)
	}

	bad := caMaterial(t, one, "server-three")
	bad["tls.crt"] = []byte("not a certificate")
	secretVolume(t, dir, bad)
	for range 2 {
		if cn, err := httpsGet(addr, two, nil); err != nil || cn != "server-two" {
			t.Fatalf("after a swap to a bad certificate: server %q, %v; want server-two kept", cn, err)
		}
	}
	if n := logs.count("keeping the certificate loaded before"); n != 1 {
		t.Errorf("logged the bad certificate %d times, want once: %q", n, logs.lines)
	}
}

// TestTLSRequireClientCert: with --tls-require-client-cert, HTTPS and gRPC
// refuse a client without a certificate or with one ca.crt does not verify,
// and log each accepted client's CN; after a swap, ca.crt is the new CA's
// and the old client certificate is refused.
func TestTLSRequireClientCert(t *testing.T) {
	dir := t.TempDir()
	one, two := newTestCA(t, "ca-one"), newTestCA(t, "ca-two")
	secretVolume(t, dir, caMaterial(t, one, "server-one"))
	logs := &logLines{}
	tg := &target{cfg: config{httpsAddr: "x", grpcAddr: "x", grpcTLS: true, tlsDir: dir, requireClient: true}, started: time.Now()}
	addr := startHTTPS(t, tg, logs)
	clientOne, clientTwo := one.clientCert(t, "client-one"), two.clientCert(t, "client-two")
	const noCert, unknownCA = "client didn't provide a certificate", "x509: certificate signed by unknown authority"

	if _, err := httpsGet(addr, one, nil); err == nil {
		t.Error("no client certificate: answered")
	}
	logs.waitLogged(t, noCert, 1)
	if _, err := httpsGet(addr, one, &clientTwo); err == nil {
		t.Error("a client certificate of another CA: answered")
	}
	logs.waitLogged(t, unknownCA, 1)
	if _, err := httpsGet(addr, one, &clientOne); err != nil {
		t.Errorf("client-one: %v", err)
	}
	if n := logs.count(`HTTPS: accepted client certificate CN="client-one"`); n != 1 {
		t.Errorf("logged client-one's handshake %d times, want once: %q", n, logs.lines)
	}
	if n := logs.count("accepted client certificate"); n != 1 {
		t.Errorf("logged %d accepted client certificates, want 1 (the refused ones are not): %q", n, logs.lines)
	}

	secretVolume(t, dir, caMaterial(t, two, "server-two"))
	if _, err := httpsGet(addr, two, &clientOne); err == nil {
		t.Error("client-one after the swap to CA two: answered")
	}
	logs.waitLogged(t, unknownCA, 2)
	if _, err := httpsGet(addr, two, &clientTwo); err != nil {
		t.Errorf("client-two after the swap: %v", err)
	}
	if n := logs.count(`HTTPS: accepted client certificate CN="client-two"`); n != 1 {
		t.Errorf("logged client-two's handshake %d times, want once: %q", n, logs.lines)
	}

	// gRPC over TLS takes the same files.
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
	check := func(cert *tls.Certificate) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(two, cert))))
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(nil); err == nil {
		t.Error("gRPC without a client certificate was answered")
	}
	if err := check(&clientOne); err == nil {
		t.Error("gRPC with client-one, after the swap to CA two, was answered")
	}
	if err := check(&clientTwo); err != nil {
		t.Errorf("gRPC with client-two: %v", err)
	}
	if n := logs.count(`gRPC: accepted client certificate CN="client-two"`); n != 1 {
		t.Errorf("logged client-two's gRPC handshake %d times, want once: %q", n, logs.lines)
	}
}

// The TLS flags refuse what would not work.
func TestTLSFlags(t *testing.T) {
	for _, c := range []struct {
		cfg  config
		want string
	}{
		{config{httpsAddr: ":8443", requireClient: true}, "--tls-require-client-cert needs --tls-dir"},
		{config{tlsDir: "/tls"}, "--tls-dir needs --https"},
		{config{tlsDir: "/tls", grpcTLS: true}, "--tls-dir needs --https"},
		{config{tlsDir: t.TempDir(), httpsAddr: ":8443"}, "tls.crt: no such file or directory"},
	} {
		tg := &target{cfg: c.cfg}
		if err := tg.setupTLS(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
