package main

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// TestWebhookServerRefusesHTTP2 (issue 20, item 7.2): controller-runtime's
// webhook server, configured as run configures it, negotiates HTTP/1.1
// only: a client that offers only h2 is refused in the TLS handshake, one
// that offers both gets HTTP/1.1.
func TestWebhookServerRefusesHTTP2(t *testing.T) {
	dir := t.TempDir()
	cert, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir, TLSOpts: []func(*tls.Config){serveTLS}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	addr := "127.0.0.1:" + strconv.Itoa(port)
	dial := func(protos ...string) (string, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{InsecureSkipVerify: true, NextProtos: protos}) // #nosec G402 -- a test of ALPN only
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ConnectionState().NegotiatedProtocol, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, err := dial("http/1.1")
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the webhook server never served: %v", err)
	}
	if proto, err := dial("h2"); err == nil {
		t.Errorf("an h2-only client got a connection (protocol %q); want the handshake refused", proto)
	}
	if proto, err := dial("h2", "http/1.1"); err != nil || proto != "http/1.1" {
		t.Errorf("offered h2 and http/1.1: %q, %v; want http/1.1", proto, err)
	}
}
