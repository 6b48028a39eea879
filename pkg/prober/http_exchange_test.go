package prober

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// oneXXFlood is more 1xx heads than the Transport reads (it stops at
// MaxResponseHeaderBytes of response head in all), then a 200.
func oneXXFlood() string {
	const early = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
	return strings.Repeat(early, 2*MaxResponseHeaderBytes/len(early)) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
}

// TestHTTPOneRequestPerProbe serves each response to the probe and to the
// kubelet's HTTP prober (net/http configured as in
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
		{name: "more 1xx than net/http reads", script: reply(oneXXFlood()), want: Failure},
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
	probed := New(nil, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.script)
			spec := httpSpec("/hz", srv.port(t))
			kubelet := kubeletHTTPClient(time.Second)
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
			target := Target{PodIP: "127.0.0.1", Session: NewSession()}
			gr, gout, ge := check("probed", func() (Result, string, error) { return probed.runOnce(context.Background(), spec, target) })
			target.Session.Close()
			if gr != wr || normalise(gout) != normalise(wo) || errText(ge) != errText(we) {
				t.Errorf("probed: %s %q %v\nkubelet: %s %q %v", gr, gout, ge, wr, wo, we)
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
