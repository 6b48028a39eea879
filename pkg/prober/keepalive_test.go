package prober

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// connCounter counts the connections an httptest server accepts.
type connCounter struct {
	mu  sync.Mutex
	new int
}

func (c *connCounter) hook(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		c.mu.Lock()
		c.new++
		c.mu.Unlock()
	}
}

func (c *connCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.new
}

// TestHTTPKeepAliveReusesOneConnection: in keep-alive mode the server sees
// one connection across probes, and a fresh one after it closed it.
func TestHTTPKeepAliveReusesOneConnection(t *testing.T) {
	var cc connCounter
	var mu sync.Mutex
	var connHeaders []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		connHeaders = append(connHeaders, r.Header.Get("Connection"))
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = cc.hook
	srv.Start()
	defer srv.Close()
	_, port := hostPort(t, srv.Listener.Addr().String())

	s := NewSession()
	p := New(nil, Options{})
	target := Target{PodIP: "127.0.0.1", KeepAlive: true, Session: s}
	spec := httpSpec("/hz", port)
	probe := func() {
		t.Helper()
		if r, out, err := p.runOnce(context.Background(), spec, target); r != Success || out != "ok" || err != nil {
			t.Fatalf("probe = %v %q %v", r, out, err)
		}
	}
	for range 5 {
		probe()
	}
	if n := cc.count(); n != 1 {
		t.Errorf("%d connections for 5 probes; want 1", n)
	}
	srv.CloseClientConnections()
	probe()
	probe()
	if n := cc.count(); n != 2 {
		t.Errorf("%d connections after the server closed one; want 2", n)
	}
	mu.Lock()
	for _, h := range connHeaders {
		if h != "keep-alive" {
			t.Errorf("Connection: %q; want keep-alive", h)
		}
	}
	mu.Unlock()

}

// TestHTTPKeepAliveSessionCloseEndsConnection: the kept connection ends
// with the session.
func TestHTTPKeepAliveSessionCloseEndsConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	ended := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			ended <- err
			return
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				ended <- err
				return
			}
			if line == "\r\n" {
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			}
		}
	}()
	_, port := hostPort(t, l.Addr().String())
	s := NewSession()
	p := New(nil, Options{})
	target := Target{PodIP: "127.0.0.1", KeepAlive: true, Session: s}
	spec := httpSpec("/", port) // the same spec: a new one is a new template
	for range 3 {
		if r, out, err := p.runOnce(context.Background(), spec, target); r != Success || out != "ok" || err != nil {
			t.Fatalf("probe = %v %q %v", r, out, err)
		}
	}
	select {
	case err := <-ended:
		t.Fatalf("connection ended before Session.Close: %v", err)
	default:
	}
	s.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, io.EOF) {
			t.Errorf("server read %v; want EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("kept connection still open after Session.Close")
	}
}

// TestHTTPKeepAliveRespectsConnectionClose: a server that answers
// "Connection: close" gets a new connection per probe.
func TestHTTPKeepAliveRespectsConnectionClose(t *testing.T) {
	srv := newScriptServer(t, reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
	s := NewSession()
	defer s.Close()
	p := New(nil, Options{})
	target := Target{PodIP: "127.0.0.1", KeepAlive: true, Session: s}
	for range 3 {
		if r, _, err := p.runOnce(context.Background(), httpSpec("/", srv.port(t)), target); r != Success || err != nil {
			t.Fatal(r, err)
		}
	}
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("%d connections; want 3", n)
	}
}

// TestTCPCloseModes: the default close is a FIN (the application reads
// EOF); rst mode resets the connection.
func TestTCPCloseModes(t *testing.T) {
	for _, tc := range []struct {
		mode    TCPCloseMode
		wantRST bool
	}{{"", false}, {TCPCloseFIN, false}, {TCPCloseRST, true}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Close() }()
			got := make(chan error, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					got <- err
					return
				}
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, err = c.Read(make([]byte, 1))
				got <- err
			}()
			_, port := hostPort(t, l.Addr().String())
			p := New(nil, Options{TCPClose: tc.mode})
			spec := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{
				TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}
			if r, out, err := p.runOnce(context.Background(), spec, Target{PodIP: "127.0.0.1"}); r != Success || err != nil {
				t.Fatalf("probe = %v %q %v", r, out, err)
			}
			err = <-got
			switch {
			case tc.wantRST && !errors.Is(err, syscall.ECONNRESET):
				t.Errorf("server read %v; want connection reset", err)
			case !tc.wantRST && !errors.Is(err, io.EOF):
				t.Errorf("server read %v; want EOF", err)
			}
		})
	}
}

func TestParseTCPCloseMode(t *testing.T) {
	for in, want := range map[string]TCPCloseMode{"": TCPCloseFIN, "fin": TCPCloseFIN, "rst": TCPCloseRST} {
		if got, err := ParseTCPCloseMode(in); got != want || err != nil {
			t.Errorf("ParseTCPCloseMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseTCPCloseMode("RST"); err == nil {
		t.Error("RST accepted")
	}
}

// TestHTTPKeepAliveNeverResends: on a kept connection, an answer is read
// there, whatever it is; only a request that got nothing at all back (the
// server had closed the idle connection) is sent again, on a new
// connection, as net/http's Transport does with a reused connection.
func TestHTTPKeepAliveNeverResends(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	steps := []struct {
		resp  string // "" closes without answering
		close bool   // close after answering
	}{
		{resp: ok},
		{resp: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{resp: "garbage\r\n\r\n", close: true},
		{resp: ok},
		{resp: ""},
		{resp: ok},
		{resp: "HTTP/1.1 200 OK\r\nContent-", close: true},
	}
	var reqs, conns atomic.Int32
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() { _ = l.Close() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				r := bufio.NewReader(c)
				for {
					for {
						line, err := r.ReadString('\n')
						if err != nil {
							return
						}
						if line == "\r\n" {
							break
						}
					}
					i := int(reqs.Add(1)) - 1
					if i >= len(steps) || steps[i].resp == "" {
						return
					}
					if _, err := c.Write([]byte(steps[i].resp)); err != nil || steps[i].close {
						return
					}
				}
			}()
		}
	}()
	_, port := hostPort(t, l.Addr().String())
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/hz"

	s := NewSession()
	defer s.Close()
	p := New(nil, Options{})
	target := Target{PodIP: "127.0.0.1", KeepAlive: true, Session: s}
	spec := httpSpec("/hz", port)
	for i, want := range []struct {
		res Result
		out string
	}{
		{Success, "ok"},
		{Success, "hello"},
		{Failure, `Get "` + url + `": net/http: HTTP/1.x transport connection broken: malformed HTTP response "<withheld>"`},
		{Success, "ok"},
		{Success, "ok"}, // sent twice: the kept connection answered nothing
		{Failure, `Get "` + url + `": net/http: HTTP/1.x transport connection broken: malformed MIME header: missing colon: "<withheld>"`},
	} {
		if r, out, err := p.runOnce(context.Background(), spec, target); r != want.res || out != want.out || err != nil {
			t.Errorf("probe %d = %v %q %v; want %v %q", i+1, r, out, err, want.res, want.out)
		}
	}
	if n := reqs.Load(); n != 7 {
		t.Errorf("the server saw %d requests for 6 probes; want 7", n)
	}
	// One per failure that ends a connection (the garbage; the silence,
	// whose request net/http sends again on a new one), plus the first: a
	// chunked answer read to its end leaves the connection to reuse.
	if n := conns.Load(); n != 3 {
		t.Errorf("the server saw %d connections; want 3", n)
	}
}
