package prober

import (
	"context"
	"net"
	"testing"
	"time"
)

// A slow answer (malformed, chunked) is read on the same connection, within
// the probe's one timeout: the server answers after 70%
// of the timeout, so a second request with a fresh timeout would take 1.4×
// at the least, and one with what is left would time out. Bounds, not
// speed: the probe must end within 1.5× its timeout, slack for a loaded
// machine, and the server must see one request.
func TestHTTPHandoverKeepsTheTimeout(t *testing.T) {
	const timeout = time.Second
	for _, tc := range []struct {
		name   string
		script func(c net.Conn)
	}{
		{"malformed", slowly(timeout*7/10, "garbage\r\n\r\n")},
		{"chunked", slowly(timeout*7/10, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")},
		{"chunked, then silence", func(c net.Conn) {
			time.Sleep(timeout * 7 / 10)
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n"))
			time.Sleep(2 * timeout)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.script)
			wr, wo, we := kubeletHTTPProbe(kubeletHTTPClient(timeout), srv.url(t, "/hz"))

			p := New(nil, Options{})
			spec := httpSpec("/hz", srv.port(t))
			spec.TimeoutSeconds = 1
			target := Target{PodIP: "127.0.0.1", Session: NewSession()}
			defer target.Session.Close()
			before := srv.reqs.Load()
			start := time.Now()
			res, out, err := p.runOnce(context.Background(), spec, target)
			took := time.Since(start)
			if res != wr || normalise(out) != normalise(wo) || errText(err) != errText(we) {
				t.Errorf("got %s %q %v\nkubelet %s %q %v", res, out, err, wr, wo, we)
			}
			if took > timeout*3/2 {
				t.Errorf("the probe took %v with a %v timeout", took, timeout)
			}
			if n := srv.reqs.Load() - before; n != 1 {
				t.Errorf("the server saw %d requests; want 1", n)
			}
		})
	}
}
