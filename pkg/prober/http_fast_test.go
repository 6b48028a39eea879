package prober

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// scriptServer answers each connection with script, after reading the
// request head, and counts connections.
type scriptServer struct {
	l      net.Listener
	wg     sync.WaitGroup
	conns  atomic.Int32
	script func(c net.Conn)
}

func newScriptServer(t *testing.T, script func(c net.Conn)) *scriptServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptServer{l: l, script: script}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
				}
				s.script(c)
			}()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); s.wg.Wait() })
	return s
}

func (s *scriptServer) port(t *testing.T) int {
	_, p := hostPort(t, s.l.Addr().String())
	return p
}

// reply writes raw and half-closes, as a server honouring Connection: close.
func reply(raw string) func(c net.Conn) {
	return func(c net.Conn) {
		_, _ = c.Write([]byte(raw))
		_ = c.(*net.TCPConn).CloseWrite()
	}
}

// TestHTTPFastPathMatchesNetHTTP runs each response through the fast path
// and through net/http alone: result, output and error must be identical,
// and responses the fast path handles must take a single connection.
func TestHTTPFastPathMatchesNetHTTP(t *testing.T) {
	big := strings.Repeat("x", 3*MaxOutputBytes)
	redirectTarget := newScriptServer(t, reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	cases := []struct {
		name   string
		script func(c net.Conn)
		fast   bool // no fallback expected
	}{
		{"200 with length", reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), true},
		{"200 until close", reply("HTTP/1.1 200 OK\r\n\r\nbody until close"), true},
		{"204", reply("HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n"), true},
		{"http/1.0", reply("HTTP/1.0 200 OK\r\n\r\nold"), true},
		{"500 with body", reply("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 6\r\n\r\nsecret"), true},
		{"404", reply("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"), true},
		{"status 600", reply("HTTP/1.1 600 Odd\r\nContent-Length: 0\r\n\r\n"), true},
		{"no reason", reply("HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nk"), true},
		{"big body with length", reply("HTTP/1.1 200 OK\r\nContent-Length: 30720\r\n\r\n" + big), true},
		{"big body until close", reply("HTTP/1.1 200 OK\r\n\r\n" + big), true},
		{"chunked", reply("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), false},
		{"redirect followed", func(c net.Conn) {
			reply("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:" + strconv.Itoa(redirectTarget.port(t)) + "/ok\r\nContent-Length: 0\r\n\r\n")(c)
		}, false},
		{"redirect elsewhere", reply("HTTP/1.1 302 Found\r\nLocation: http://192.0.2.1/x\r\nContent-Length: 5\r\n\r\nmoved"), false},
		{"100 continue", reply("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), false},
		{"garbage", reply("garbage\r\n\r\n"), false},
		{"lf only", reply("HTTP/1.1 200 OK\n\nlf only"), false},
		{"folded header", reply("HTTP/1.1 200 OK\r\n Folded: x\r\n\r\n"), false},
		{"two lengths", reply("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"), false},
		{"negative length", reply("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), false},
		{"control byte", reply("HTTP/1.1 200 OK\r\nX: \x01\r\n\r\n"), false},
		{"closes early", func(net.Conn) {}, false},
		{"short body", reply("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"), false},
		{"head then silence", func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"))
			time.Sleep(1500 * time.Millisecond)
		}, true},
		{"silence", func(net.Conn) { time.Sleep(1500 * time.Millisecond) }, true},
		{"half a head then silence", func(c net.Conn) {
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-"))
			time.Sleep(1500 * time.Millisecond)
		}, true},
	}
	fast := New(nil, Options{})
	slow := New(nil, Options{})
	slow.http.noFast = true
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.script)
			spec := httpSpec("/hz", srv.port(t))
			target := Target{PodIP: "127.0.0.1", Session: NewSession()}
			defer target.Session.Close()

			wr, wo, we := slow.runOnce(context.Background(), spec, target)
			before := srv.conns.Load()
			gr, gout, ge := fast.runOnce(context.Background(), spec, target)
			if gr != wr || normalise(gout) != normalise(wo) || errText(ge) != errText(we) {
				t.Errorf("fast path: %s %q %v\nnet/http:  %s %q %v", gr, gout, ge, wr, wo, we)
			}
			if n := srv.conns.Load() - before; tc.fast && n != 1 {
				t.Errorf("fast path used %d connections; want 1 (no fallback)", n)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return normalise(err.Error())
}

// TestHTTPFastPathRequestBytes: the fast path writes the same request head
// as net/http, line for line, for every header shape a probe can declare.
func TestHTTPFastPathRequestBytes(t *testing.T) {
	headerSets := [][]string{
		nil,
		{"User-Agent", "my-agent/2"},
		{"User-Agent", ""},
		{"accept", "application/json"},
		{"Accept", ""},
		{"x-token", "one", "X-Token", "two"},
		{"Host", "vhost.example"},
		{"Host", "vhost.example:8080", "x-a", " padded "},
		{"Zeta", "z", "alpha", "a", "Accept-Encoding", "gzip"},
	}
	paths := []string{"/hz", "/a b?x=1&y=%20", "", "/ünï", "relative"}
	for _, set := range headerSets {
		for _, path := range paths {
			var hs []v1.HTTPHeader
			for i := 0; i < len(set); i += 2 {
				hs = append(hs, hdr(set[i], set[i+1]))
			}
			srv := newWireServer(t)
			spec := httpSpec(path, srv.port(t), hs...)
			target := Target{PodIP: "127.0.0.1"}
			slow := New(nil, Options{})
			slow.http.noFast = true
			if r, out, err := slow.runOnce(context.Background(), spec, target); r != Success || err != nil {
				t.Fatalf("net/http: %v %q %v", r, out, err)
			}
			fast := New(nil, Options{})
			if r, out, err := fast.runOnce(context.Background(), spec, target); r != Success || err != nil {
				t.Fatalf("fast: %v %q %v", r, out, err)
			}
			reqs := srv.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests; want 2", len(reqs))
			}
			if strings.Join(reqs[0], "\n") != strings.Join(reqs[1], "\n") {
				t.Errorf("headers %q path %q:\nnet/http %q\nfast     %q", set, path, reqs[0], reqs[1])
			}
		}
	}
}

// TestHTTPFastPathTemplateCached: a session reuses its template and
// rebuilds it when the pod IP changes.
func TestHTTPFastPathTemplateCached(t *testing.T) {
	srv := newScriptServer(t, reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	spec := httpSpec("/hz", srv.port(t))
	s := NewSession()
	defer s.Close()
	p := New(nil, Options{})
	target := Target{PodIP: "127.0.0.1", Session: s}
	if r, _, err := p.runOnce(context.Background(), spec, target); r != Success || err != nil {
		t.Fatal(r, err)
	}
	first := s.httpTemplate(spec.HTTPGet, target)
	if first == nil || !bytes.Contains(first.wire, []byte("Host: 127.0.0.1:")) {
		t.Fatalf("template not kept: %+v", first)
	}
	_, _, _ = p.runOnce(context.Background(), spec, target)
	if s.httpTemplate(spec.HTTPGet, target) != first {
		t.Error("template rebuilt for the same inputs")
	}
	target.PodIP = "127.0.0.2"
	if s.httpTemplate(spec.HTTPGet, target) != nil {
		t.Error("template kept for another pod IP")
	}
}
