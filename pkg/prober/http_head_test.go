package prober

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// headerLines is n bytes of header lines, 1 KiB each.
func headerLines(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "X-Pad-%d: %s\r\n", i, strings.Repeat("p", 1000))
	}
	return b.String()
}

// padHeaders answers with n bytes of headers, 1 KiB each, and "ok".
func padHeaders(n int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := range n >> 10 {
			w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("p", 1000))
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// Issue 30, item 2: probed reads at most MaxResponseHeaderBytes of an
// answer's head, on every Transport a probe may use: HTTP/1.1 (shared,
// scoped to the pod by the host policy, kept alive), HTTP/2 over TLS and
// h2c. A larger head fails the probe with a text that says so, and costs
// about what the limit allows; net/http's default of 10 MB (the kubelet's)
// read 1 MiB of headers and judged the probe a success. A head within the
// limit, informational answers included, passes as before.
func TestHTTPResponseHeadIsBounded(t *testing.T) {
	const exceeded = "net/http: server response headers exceeded 32768 bytes; aborted"
	// Over the limit by a frame or more, net/http ends the connection
	// instead (it cannot say why: a PROTOCOL_ERROR).
	const exceededH2 = "http2: response header list larger than advertised limit (32768 bytes)|connection error: PROTOCOL_ERROR"
	okBody := "Content-Length: 2\r\n\r\nok"
	tlsH2 := httptest.NewUnstartedServer(padHeaders(64 << 10))
	tlsH2.EnableHTTP2 = true
	tlsH2.StartTLS()
	t.Cleanup(tlsH2.Close)
	_, tlsPort := hostPort(t, tlsH2.Listener.Addr().String())
	h2cPort := h2cServerWith(t, padHeaders(64<<10))

	for _, tc := range []struct {
		name string
		raw  string // a raw HTTP/1.1 answer; or
		port int    // a server's port
		tls  bool
		h2c  bool
		// keepAlive and guard pick the worker's own Transport.
		keepAlive bool
		guard     *hostpolicy.Guard
		want      Result
		out       string
		// maxAlloc bounds what the probe allocates (raw answers only: the
		// server then allocates nothing).
		maxAlloc uint64
	}{
		{name: "24 KiB of headers", raw: "HTTP/1.1 200 OK\r\n" + headerLines(24<<10) + okBody, want: Success, out: "ok"},
		{name: "1 MiB of headers", raw: "HTTP/1.1 200 OK\r\n" + headerLines(1<<20) + okBody, want: Failure, out: exceeded, maxAlloc: 256 << 10},
		{name: "1 MiB of headers, kept alive", raw: "HTTP/1.1 200 OK\r\n" + headerLines(1<<20) + okBody, keepAlive: true, want: Failure, out: exceeded, maxAlloc: 256 << 10},
		{name: "1 MiB of headers, under the host policy", raw: "HTTP/1.1 200 OK\r\n" + headerLines(1<<20) + okBody, guard: guardFor(hostpolicy.DenyNodeLocal), want: Failure, out: exceeded, maxAlloc: 256 << 10},
		{name: "informational answers count", raw: strings.Repeat("HTTP/1.1 103 Early Hints\r\n"+headerLines(12<<10)+"\r\n", 3) + "HTTP/1.1 200 OK\r\n" + okBody, want: Failure, out: exceeded},
		{name: "HTTP/2 over TLS, 64 KiB of headers", port: tlsPort, tls: true, want: Failure, out: exceededH2},
		{name: "h2c, 64 KiB of headers", port: h2cPort, h2c: true, want: Failure, out: exceededH2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := tc.port
			if tc.raw != "" {
				raw := []byte(tc.raw) // once: the server then allocates nothing
				port = newScriptServer(t, func(c net.Conn) {
					_, _ = c.Write(raw)
					_ = c.(*net.TCPConn).CloseWrite()
				}).port(t)
			}
			spec := httpSpec("/hz", port)
			if tc.tls {
				spec.HTTPGet.Scheme = v1.URISchemeHTTPS
			}
			if tc.h2c {
				h2 := v1.HTTPProtocolHTTP2
				spec.HTTPGet.Protocol = &h2
			}
			p := New(nil, Options{HostGuard: tc.guard})
			target := Target{PodIP: "127.0.0.1", PodIPs: []string{"127.0.0.1"}, KeepAlive: tc.keepAlive, Session: NewSession()}
			defer target.Session.Close()
			// A first probe warms up what is set up once (Transports, TLS).
			_, _, _ = p.runOnce(context.Background(), spec, target)
			var (
				res Result
				out string
				err error
			)
			var before, after goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&before)
			res, out, err = p.runOnce(context.Background(), spec, target)
			goruntime.ReadMemStats(&after)
			n := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s %q %v; allocated %d KiB", res, out, err, n>>10)
			if res != tc.want || err != nil || !endsInOneOf(out, tc.out) {
				t.Errorf("got %s %q %v; want %s ending in %q", res, out, err, tc.want, tc.out)
			}
			if tc.maxAlloc > 0 && n > tc.maxAlloc {
				t.Errorf("the probe allocated %d KiB, bound %d KiB", n>>10, tc.maxAlloc>>10)
			}
		})
	}
}

// endsInOneOf: s ends in one of the |-separated texts.
func endsInOneOf(s, texts string) bool {
	for _, x := range strings.Split(texts, "|") {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

// h2cServerWith serves h with HTTP/2 over cleartext, prior knowledge only.
func h2cServerWith(t *testing.T, h http.Handler) int {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	_, port := hostPort(t, s.Listener.Addr().String())
	return port
}

// A response head over the limit ends the probe when the limit is reached,
// not at the probe's timeout: a server that sends headers without end is
// cut off at once.
func TestHTTPEndlessHeadFailsFast(t *testing.T) {
	srv := newScriptServer(t, func(c net.Conn) {
		_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\n"))
		line := []byte("X-Pad: " + strings.Repeat("p", 1000) + "\r\n")
		for {
			if _, err := c.Write(line); err != nil {
				return
			}
		}
	})
	spec := httpSpec("/hz", srv.port(t))
	spec.TimeoutSeconds = 30
	start := time.Now()
	res, out, err := New(nil, Options{}).runOnce(context.Background(), spec, Target{PodIP: "127.0.0.1"})
	if res != Failure || err != nil || !strings.Contains(out, "exceeded 32768 bytes") {
		t.Fatalf("got %s %q %v", res, out, err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the probe took %v, half its timeout", took)
	}
}
