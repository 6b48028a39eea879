package prober

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A response the fast path leaves to net/http must not get a second full
// timeout: the server answers each request with a malformed head after 70%
// of the timeout, so a fallback with a fresh timeout would take 1.7× at the
// least. Bounds, not speed: the probe must end within 1.5× its timeout,
// slack for a loaded machine.
func TestHTTPFallbackKeepsTheTimeout(t *testing.T) {
	const timeout = time.Second
	srv := newScriptServer(t, func(c net.Conn) {
		time.Sleep(timeout * 7 / 10)
		reply("garbage\r\n\r\n")(c)
	})
	p := New(nil, Options{})
	spec := httpSpec("/hz", srv.port(t))
	spec.TimeoutSeconds = 1
	target := Target{PodIP: "127.0.0.1", Session: NewSession()}
	defer target.Session.Close()

	start := time.Now()
	res, out, err := p.runOnce(context.Background(), spec, target)
	took := time.Since(start)
	if err != nil || res != Failure || !strings.Contains(out, "Client.Timeout exceeded") {
		t.Errorf("got %s %q %v; want a Failure worded as net/http's timeout", res, out, err)
	}
	if took > timeout*3/2 {
		t.Errorf("the probe took %v with a %v timeout: the fallback got more than the time left", took, timeout)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("%d connections; want 2 (the fast path's, then net/http's)", n)
	}
}
