package prober

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// scriptServer answers each connection with script, after reading the
// request head, and counts connections and requests.
type scriptServer struct {
	l      net.Listener
	wg     sync.WaitGroup
	conns  atomic.Int32
	reqs   atomic.Int32
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
				_ = c.SetDeadline(time.Now().Add(15 * time.Second))
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
				s.reqs.Add(1)
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

func (s *scriptServer) url(t *testing.T, path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(s.port(t)) + path
}

// reply writes raw and half-closes, as a server honouring Connection: close.
func reply(raw string) func(c net.Conn) {
	return func(c net.Conn) {
		_, _ = c.Write([]byte(raw))
		_ = c.(*net.TCPConn).CloseWrite()
	}
}

// slowly writes each part after a pause, then half-closes.
func slowly(pause time.Duration, parts ...string) func(c net.Conn) {
	return func(c net.Conn) {
		for _, p := range parts {
			time.Sleep(pause)
			if _, err := c.Write([]byte(p)); err != nil {
				return
			}
		}
		_ = c.(*net.TCPConn).CloseWrite()
	}
}

// resetAfter writes raw, then resets the connection.
func resetAfter(raw string) func(c net.Conn) {
	return func(c net.Conn) {
		_, _ = c.Write([]byte(raw))
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close()
	}
}

// silentAfter writes raw, then says nothing for longer than the probe's timeout.
func silentAfter(raw string) func(c net.Conn) {
	return func(c net.Conn) {
		_, _ = c.Write([]byte(raw))
		time.Sleep(1500 * time.Millisecond)
	}
}

// oneXXFlood is more 1xx heads than net/http's Transport reads (it stops
// at 10 MiB of response head in all), then a 200.
func oneXXFlood() string {
	const early = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
	return strings.Repeat(early, (11<<20)/len(early)) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
}

// TestHTTPOneRequestPerProbe serves each response to the probe (fast paths
// on and off) and to the kubelet's HTTP prober (net/http configured as in
// pkg/probe/http): result, output and error must be the kubelet's, and the
// server must see exactly the kubelet's requests: one, whatever the answer,
// plus a followed redirect's own request.
func TestHTTPOneRequestPerProbe(t *testing.T) {
	big := strings.Repeat("x", 3*MaxOutputBytes)
	target := newScriptServer(t, reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	const chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	cases := []struct {
		name   string
		script func(c net.Conn)
		reqs   int32  // requests per probe; 0 means 1
		target int32  // requests per probe to the redirect target
		want   Result // the kubelet's result, when the case is about it
		slow   bool   // 10s timeout, not 1s: parsing takes long under -race
	}{
		{name: "200 with length", script: reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), want: Success},
		{name: "200 until close", script: reply("HTTP/1.1 200 OK\r\n\r\nbody until close"), want: Success},
		{name: "204", script: reply("HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n")},
		{name: "http/1.0", script: reply("HTTP/1.0 200 OK\r\n\r\nold")},
		{name: "500 with body", script: reply("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 6\r\n\r\nsecret")},
		{name: "404", script: reply("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")},
		{name: "status 600", script: reply("HTTP/1.1 600 Odd\r\nContent-Length: 0\r\n\r\n")},
		{name: "no reason", script: reply("HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nk")},
		{name: "body with a bare LF", script: reply("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\na\nb")},
		{name: "big body with length", script: reply("HTTP/1.1 200 OK\r\nContent-Length: 30720\r\n\r\n" + big)},
		{name: "big body until close", script: reply("HTTP/1.1 200 OK\r\n\r\n" + big)},

		{name: "chunked", script: reply(chunked + "5\r\nhello\r\n0\r\n\r\n"), want: Success},
		{name: "slow chunked", script: slowly(500*time.Millisecond, chunked+"5\r\nhello\r\n0\r\n\r\n"), want: Success},
		{name: "chunks trickling", script: slowly(100*time.Millisecond, chunked, "1\r\na\r\n", "1\r\nb\r\n", "0\r\n\r\n"), want: Success},
		{name: "bad chunk", script: reply(chunked + "zz\r\nbad chunk\r\n")},
		{name: "chunked then silence", script: silentAfter(chunked + "5\r\nhello\r\n")},

		{name: "100 then 200", script: reply("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), want: Success},
		{name: "103 then 200", script: reply("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), want: Success},
		{name: "100 then 103 then 503", script: reply("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n"), want: Failure},
		{name: "100 slowly then 200", script: slowly(300*time.Millisecond, "HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), want: Success},
		{name: "more 1xx than net/http reads", script: reply(oneXXFlood()), want: Failure, slow: true},
		{name: "101", script: reply("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\nafter")},
		{name: "100 then garbage", script: reply("HTTP/1.1 100 Continue\r\n\r\ngarbage\r\n\r\n")},

		{name: "redirect followed", script: reply("HTTP/1.1 302 Found\r\nLocation: " + target.url(t, "/ok") + "\r\nContent-Length: 0\r\n\r\n"), target: 1, want: Success},
		{name: "redirect elsewhere", script: reply("HTTP/1.1 302 Found\r\nLocation: http://192.0.2.1/x\r\nContent-Length: 5\r\n\r\nmoved"), want: Warning},
		{name: "redirect elsewhere, chunked", script: reply("HTTP/1.1 301 Moved\r\nLocation: http://192.0.2.1/x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nmoved\r\n0\r\n\r\n"), want: Warning},
		{name: "redirect loop", script: reply("HTTP/1.1 302 Found\r\nLocation: /loop\r\nContent-Length: 0\r\n\r\n"), reqs: 10, want: Failure},
		{name: "304", script: reply("HTTP/1.1 304 Not Modified\r\n\r\n"), want: Warning},
		{name: "redirect with a bad location", script: reply("HTTP/1.1 302 Found\r\nLocation: ::bad url\r\n\r\n")},

		{name: "garbage", script: reply("garbage\r\n\r\n"), want: Failure},
		{name: "garbage line then silence", script: silentAfter("garbage\r\n"), want: Failure},
		{name: "lf only", script: reply("HTTP/1.1 200 OK\n\nlf only")},
		{name: "folded header", script: reply("HTTP/1.1 200 OK\r\n Folded: x\r\n\r\n")},
		{name: "no colon then silence", script: silentAfter("HTTP/1.1 200 OK\r\nNo-Colon\r\n")},
		{name: "two lengths", script: reply("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")},
		{name: "negative length", script: reply("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n")},
		{name: "control byte", script: reply("HTTP/1.1 200 OK\r\nX: \x01\r\n\r\n")},
		{name: "head bigger than the buffer", script: reply("HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("b", 20<<10) + "\r\nContent-Length: 2\r\n\r\nok"), want: Success},

		{name: "closes early", script: func(net.Conn) {}, want: Failure},
		{name: "reset after the write", script: resetAfter(""), want: Failure},
		{name: "reset mid head", script: resetAfter("HTTP/1.1 200 OK\r\nContent-")},
		{name: "reset mid body", script: resetAfter("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")},
		{name: "short body", script: reply("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")},

		{name: "head then silence", script: silentAfter("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")},
		{name: "silence", script: silentAfter(""), want: Failure},
		{name: "half a head then silence", script: silentAfter("HTTP/1.1 200 OK\r\nContent-")},
		{name: "status line then silence", script: silentAfter("HTTP/1.1 200 OK\r\n")},
	}
	fast := New(nil, Options{})
	off := New(nil, Options{DisableFastPaths: true})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.script)
			spec := httpSpec("/hz", srv.port(t))
			kubelet := kubeletHTTPClient(time.Second)
			if tc.slow {
				spec.TimeoutSeconds = 10
				kubelet = kubeletHTTPClient(10 * time.Second)
			}
			wantReqs := max(tc.reqs, 1)
			check := func(who string, run func() (Result, string, error)) (Result, string, error) {
				t.Helper()
				reqs, targetReqs := srv.reqs.Load(), target.reqs.Load()
				r, out, err := run()
				if n := srv.reqs.Load() - reqs; n != wantReqs {
					t.Errorf("%s: the server saw %d requests; want %d", who, n, wantReqs)
				}
				if n := target.reqs.Load() - targetReqs; n != tc.target {
					t.Errorf("%s: the redirect target saw %d requests; want %d", who, n, tc.target)
				}
				return r, out, err
			}
			wr, wo, we := check("kubelet", func() (Result, string, error) { return kubeletHTTPProbe(kubelet, srv.url(t, "/hz")) })
			if tc.want != "" && wr != tc.want {
				t.Fatalf("the kubelet's result is %s %q %v; the case wants %s", wr, wo, we, tc.want)
			}
			for _, p := range []struct {
				name string
				p    *Prober
			}{{"fast paths", fast}, {"fast paths off", off}} {
				target := Target{PodIP: "127.0.0.1", Session: NewSession()}
				gr, gout, ge := check(p.name, func() (Result, string, error) { return p.p.runOnce(context.Background(), spec, target) })
				target.Session.Close()
				if gr != wr || normalise(gout) != normalise(wo) || errText(ge) != errText(we) {
					t.Errorf("%s: %s %q %v\nkubelet:    %s %q %v", p.name, gr, gout, ge, wr, wo, we)
				}
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
	first, _ := s.takeHTTP(spec.HTTPGet, target)
	if first == nil || !bytes.Contains(first.wire, []byte("Host: 127.0.0.1:")) {
		t.Fatalf("template not kept: %+v", first)
	}
	_, _, _ = p.runOnce(context.Background(), spec, target)
	if again, _ := s.takeHTTP(spec.HTTPGet, target); again != first {
		t.Error("template rebuilt for the same inputs")
	}
	target.PodIP = "127.0.0.2"
	if other, _ := s.takeHTTP(spec.HTTPGet, target); other != nil {
		t.Error("template kept for another pod IP")
	}
}

// TestHTTPFastPathsOff: with DisableFastPaths every httpGet probe goes
// through net/http's Transport (which reports its connections to an
// httptrace.ClientTrace); with fast paths on, a plain answer never does.
func TestHTTPFastPathsOff(t *testing.T) {
	srv := newScriptServer(t, reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	spec := httpSpec("/hz", srv.port(t))
	for _, tc := range []struct {
		opts     Options
		keep     bool
		wantConn int32 // connections net/http got, per probe
	}{
		{Options{}, false, 0},
		{Options{}, true, 0},
		{Options{DisableFastPaths: true}, false, 1},
		{Options{DisableFastPaths: true}, true, 1},
	} {
		var got atomic.Int32
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { got.Add(1) },
		})
		p := New(nil, tc.opts)
		target := Target{PodIP: "127.0.0.1", KeepAlive: tc.keep, Session: NewSession()}
		before := srv.conns.Load()
		for range 3 {
			if r, out, err := p.runOnce(ctx, spec, target); r != Success || out != "ok" || err != nil {
				t.Fatalf("%+v: probe = %v %q %v", tc, r, out, err)
			}
		}
		target.Session.Close()
		if n := got.Load(); n != 3*tc.wantConn {
			t.Errorf("%+v keepAlive=%v: net/http got %d connections for 3 probes; want %d", tc.opts, tc.keep, n, 3*tc.wantConn)
		}
		if n := srv.conns.Load() - before; n != 3 {
			t.Errorf("%+v keepAlive=%v: the server saw %d connections; want 3", tc.opts, tc.keep, n)
		}
	}
}
