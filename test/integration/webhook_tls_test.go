//go:build integration

package integration

import (
	"crypto/tls"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestWebhookServesNoHTTP2 (issue 20, item 7.2): the webhook binary's two
// TLS servers, the admission webhooks and /metrics, negotiate HTTP/1.1
// only, as probed's own endpoints do: a client that offers only h2 is
// refused in the handshake, one that offers both gets HTTP/1.1.
func TestWebhookServesNoHTTP2(t *testing.T) {
	port := freePort(t)
	installWebhook(t, port)
	w := startWebhook(t, port, "--metrics-secure=true")
	w.waitReady()
	for name, addr := range map[string]string{"webhook": "127.0.0.1:" + strconv.Itoa(port), "metrics": w.metrics} {
		dial := func(protos ...string) (string, error) {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
				&tls.Config{InsecureSkipVerify: true, NextProtos: protos, ServerName: webhookName + "." + webhookNS + ".svc"}) // #nosec G402 -- ALPN only
			if err != nil {
				return "", err
			}
			defer conn.Close()
			return conn.ConnectionState().NegotiatedProtocol, nil
		}
		eventually(t, name+" serving", 30*time.Second, func() bool { _, err := dial("http/1.1"); return err == nil })
		if proto, err := dial("h2"); err == nil {
			t.Errorf("%s: an h2-only client got a connection (protocol %q); want the handshake refused", name, proto)
		}
		if proto, err := dial("h2", "http/1.1"); err != nil || proto != "http/1.1" {
			t.Errorf("%s: offered h2 and http/1.1: %q, %v; want http/1.1", name, proto, err)
		}
	}
}
