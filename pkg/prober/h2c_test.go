package prober

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// h2cServer serves HTTP/2 over cleartext with prior knowledge only (and
// HTTP/1 too when http1), answering "ok" with the protocol it saw, and
// counts its connections.
func h2cServer(t *testing.T, http1 bool) (port int, proto *atomic.Value, conns *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proto, conns = new(atomic.Value), new(atomic.Int32)
	s := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			proto.Store(r.Proto)
			_, _ = w.Write([]byte("ok"))
		}),
		Protocols: new(http.Protocols),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		},
	}
	s.Protocols.SetUnencryptedHTTP2(true)
	s.Protocols.SetHTTP1(http1)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })
	_, port = hostPort(t, l.Addr().String())
	return port, proto, conns
}

func h2cSpec(port int) *v1.Probe {
	spec := httpSpec("/hz", port)
	h2 := v1.HTTPProtocolHTTP2
	spec.HTTPGet.Protocol = &h2
	return spec
}

// TestHTTPH2C: httpGet.protocol HTTP2 (KEP-5999) speaks HTTP/2 over
// cleartext with prior knowledge, as the kubelet's h2c Transport does: to
// an h2c server it is HTTP/2, one connection per probe, or one for all with
// keep-alive; HTTP1 and no protocol stay HTTP/1.1.
func TestHTTPH2C(t *testing.T) {
	port, proto, conns := h2cServer(t, true)
	for _, guard := range []*hostpolicy.Guard{nil, guardFor(hostpolicy.DenyNodeLocal)} {
		p := New(nil, Options{HostGuard: guard})
		target := Target{PodIP: "127.0.0.1", PodIPs: []string{"127.0.0.1"}, Session: NewSession()}
		before := conns.Load()
		for range 3 {
			if res, out, err := p.runOnce(context.Background(), h2cSpec(port), target); res != Success || out != "ok" || err != nil {
				t.Fatalf("policy %v: h2c probe = %v %q %v", guard.Policy(), res, out, err)
			}
			if got := proto.Load(); got != "HTTP/2.0" {
				t.Errorf("policy %v: the server saw %v; want HTTP/2.0", guard.Policy(), got)
			}
		}
		if n := conns.Load() - before; n != 3 {
			t.Errorf("policy %v: %d connections for 3 probes; want 3", guard.Policy(), n)
		}
		target.KeepAlive = true
		before = conns.Load()
		for range 3 {
			if res, out, err := p.runOnce(context.Background(), h2cSpec(port), target); res != Success || err != nil {
				t.Fatalf("policy %v: kept-alive h2c probe = %v %q %v", guard.Policy(), res, out, err)
			}
		}
		if n := conns.Load() - before; n != 1 {
			t.Errorf("policy %v: %d connections for 3 kept-alive probes; want 1", guard.Policy(), n)
		}
		target.Session.Close()

		for _, spec := range []*v1.Probe{httpSpec("/hz", port), h2cSpec(port)} {
			if spec.HTTPGet.Protocol != nil {
				h1 := v1.HTTPProtocolHTTP1
				spec.HTTPGet.Protocol = &h1
			}
			if res, _, err := p.runOnce(context.Background(), spec, Target{PodIP: "127.0.0.1", PodIPs: []string{"127.0.0.1"}}); res != Success || err != nil {
				t.Fatalf("HTTP/1.1 probe = %v %v", res, err)
			}
			if got := proto.Load(); got != "HTTP/1.1" {
				t.Errorf("protocol %v: the server saw %v; want HTTP/1.1", spec.HTTPGet.Protocol, got)
			}
		}
	}
}

// TestHTTPH2CAgainstHTTP1: an h2c probe of a server that speaks only
// HTTP/1.1 fails as a transport error, and an HTTP/1.1 probe of an
// h2c-only server fails too.
func TestHTTPH2CAgainstHTTP1(t *testing.T) {
	_, _, http1 := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	h2only, _, _ := h2cServer(t, false)
	p := New(nil, Options{})
	for _, tc := range []struct {
		name string
		spec *v1.Probe
	}{
		{"h2c probe, HTTP/1.1 server", h2cSpec(http1)},
		{"HTTP/1.1 probe, h2c-only server", httpSpec("/hz", h2only)},
	} {
		res, out, err := p.runOnce(context.Background(), tc.spec, Target{PodIP: "127.0.0.1"})
		if res != Failure || err != nil || !strings.HasPrefix(out, `Get "http://127.0.0.1:`) {
			t.Errorf("%s: %v %q %v; want a transport failure", tc.name, res, out, err)
		}
	}
}
