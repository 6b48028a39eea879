package endpoints

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
)

// serve runs ServeListener on a loopback port until the test ends, and
// returns its address.
func serve(t *testing.T, o Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeListener: %v", err)
		}
	})
	return ln.Addr().String()
}

// tlsGet GETs https://addr/path with token, trusting anything, and returns
// the status, body, protocol and the server's leaf certificate.
func tlsGet(t *testing.T, addr, path, token string) (int, string, string, *x509.Certificate) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Proto, resp.TLS.PeerCertificates[0]
}

// Without certificate files, probed serves TLS with a self-signed
// certificate for its hosts, HTTP/1.1 only; the guard applies over TLS.
func TestServeSelfSignedTLS(t *testing.T) {
	addr := serve(t, Options{
		Gatherer: testRegistry(),
		Auth:     fakeAuth(&asked{}),
		Cert:     ServingCert{Hosts: []string{"node-a", "localhost", "127.0.0.1"}},
	})
	code, body, proto, cert := tlsGet(t, addr, "/metrics", "reader")
	if code != 200 || !strings.Contains(body, "probed_test_total 1") {
		t.Errorf("/metrics with a token: %d %q", code, body)
	}
	if proto != "HTTP/1.1" {
		t.Errorf("protocol %s, want HTTP/1.1 (HTTP/2 off)", proto)
	}
	if !strings.HasPrefix(cert.Subject.CommonName, "node-a") || !slices.Contains(cert.DNSNames, "localhost") ||
		!slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("127.0.0.1")) }) {
		t.Errorf("self-signed certificate for %q, DNS %v, IPs %v", cert.Subject.CommonName, cert.DNSNames, cert.IPAddresses)
	}
	if code, _, _, _ := tlsGet(t, addr, "/metrics", ""); code != 401 {
		t.Errorf("/metrics without a token over TLS: %d, want 401", code)
	}
	if code, _, _, _ := tlsGet(t, addr, "/healthz", ""); code != 200 {
		t.Errorf("/healthz without a token over TLS: %d, want 200", code)
	}
	// Plain HTTP to the TLS port gets nothing but the error.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(b), "probed_test_total") {
			t.Errorf("plain HTTP on the TLS port: %d %q", resp.StatusCode, b)
		}
	}
}

func writePair(t *testing.T, certFile, keyFile, host string) []byte {
	t.Helper()
	cert, key, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	leaf, _ := pem.Decode(cert)
	return leaf.Bytes
}

// A certificate and key from files are served, and a new pair written over
// them is served without a restart.
func TestServeReloadsCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := writePair(t, certFile, keyFile, "first")
	addr := serve(t, Options{
		Gatherer: testRegistry(),
		Auth:     fakeAuth(&asked{}),
		Cert:     ServingCert{CertFile: certFile, KeyFile: keyFile},
	})
	if _, _, _, cert := tlsGet(t, addr, "/healthz", ""); !bytes.Equal(cert.Raw, first) {
		t.Fatalf("served %q, not the certificate file's", cert.Subject.CommonName)
	}
	second := writePair(t, certFile, keyFile, "second")
	var served string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, _, _, cert := tlsGet(t, addr, "/healthz", "")
		served = cert.Subject.CommonName
		return bytes.Equal(cert.Raw, second), nil
	})
	if err != nil {
		t.Fatalf("still serving %q 30s after the files changed", served)
	}
}

// Bad certificate flags fail the server at start with a clear error.
func TestServeRefusesBadCertificates(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writePair(t, certFile, keyFile, "a")
	otherKey := filepath.Join(dir, "other.key")
	writePair(t, filepath.Join(dir, "other.crt"), otherKey, "b")
	for name, c := range map[string]ServingCert{
		"missing":       {CertFile: filepath.Join(dir, "nope.crt"), KeyFile: keyFile},
		"mismatched":    {CertFile: certFile, KeyFile: otherKey},
		"only the cert": {CertFile: certFile},
		"no hosts":      {},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		err = ServeListener(context.Background(), ln, Options{Gatherer: testRegistry(), Auth: fakeAuth(&asked{}), Cert: c})
		if err == nil {
			t.Errorf("%s: served", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// The insecure mode serves plain HTTP with no authentication, and only on
// loopback.
func TestServeInsecure(t *testing.T) {
	addr := serve(t, Options{Gatherer: testRegistry(), Insecure: true})
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "probed_test_total 1") {
		t.Errorf("insecure /metrics: %d %q", resp.StatusCode, b)
	}
}

// A pair that does not load (a key that does not match, a file written
// half way) keeps the last good certificate in service until a good pair
// is written.
func TestCertFilesKeepTheLastGoodPair(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := writePair(t, certFile, keyFile, "first")
	f, err := newCertFiles(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	served := func() []byte { c, _ := f.get(nil); return c.Certificate[0] }
	writePair(t, filepath.Join(dir, "other.crt"), filepath.Join(dir, "other.key"), "other")
	otherKey, _ := os.ReadFile(filepath.Join(dir, "other.key"))
	if err := os.WriteFile(keyFile, otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := f.reload(); changed || err == nil || !bytes.Equal(served(), first) {
		t.Fatalf("mismatched pair: changed %v, err %v; want an error and the first certificate still served", changed, err)
	}
	if err := os.WriteFile(certFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reload(); err == nil || !bytes.Equal(served(), first) {
		t.Fatalf("half-written certificate: err %v; want an error and the first certificate still served", err)
	}
	second := writePair(t, certFile, keyFile, "second")
	if changed, err := f.reload(); !changed || err != nil || !bytes.Equal(served(), second) {
		t.Fatalf("good pair: changed %v, err %v; want the second certificate served", changed, err)
	}
	if changed, err := f.reload(); changed || err != nil {
		t.Errorf("unchanged files: changed %v, err %v; want neither", changed, err)
	}
}
