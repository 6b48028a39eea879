package prober

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// event is one call to an EventSink.
type event struct {
	Type, Reason, Message string
}

// recordingSink is an EventSink that keeps what it is given.
type recordingSink struct {
	mu     sync.Mutex
	events []event
}

func (s *recordingSink) Event(eventType, reason, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, event{eventType, reason, message})
}

func (s *recordingSink) all() []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event(nil), s.events...)
}

// fakeRunner is a CommandRunner that answers from a function and counts calls.
type fakeRunner struct {
	mu    sync.Mutex
	calls int
	cmds  [][]string
	fn    func(call int) ([]byte, int, error)
}

func (r *fakeRunner) ExecInContainer(_ context.Context, _ string, cmd []string, _ time.Duration) ([]byte, int, error) {
	r.mu.Lock()
	r.calls++
	n := r.calls
	r.cmds = append(r.cmds, cmd)
	r.mu.Unlock()
	return r.fn(n)
}

func (r *fakeRunner) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// timeoutError is what a CommandRunner returns when its timeout expires.
type timeoutError struct{}

func (timeoutError) Error() string { return "exec timed out" }
func (timeoutError) Timeout() bool { return true }

// hostPort splits a listener or server address into host and numeric port.
func hostPort(t testing.TB, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return h, n
}

// serve starts a loopback HTTP server closed at the end of the test.
func serve(t testing.TB, h http.Handler) (*httptest.Server, string, int) {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	host, port := hostPort(t, s.Listener.Addr().String())
	return s, host, port
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port := hostPort(t, l.Addr().String())
	_ = l.Close()
	return port
}

func httpSpec(path string, port int, headers ...v1.HTTPHeader) *v1.Probe {
	return &v1.Probe{
		TimeoutSeconds: 1,
		ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(int32(port)), HTTPHeaders: headers,
		}},
	}
}

func hdr(name, value string) v1.HTTPHeader { return v1.HTTPHeader{Name: name, Value: value} }

// probe runs req through the shared Transport, as a probe the host policy
// does not scope runs.
func (p *httpProber) probe(req *http.Request, timeout time.Duration) (Result, string, error) {
	return p.send(&http.Client{Timeout: timeout, Transport: p.transport, CheckRedirect: scope{}.redirectPolicy}, req, nil)
}

// probe runs one plaintext health check of host:port on a new connection.
func (p *grpcProber) probe(ctx context.Context, host, service string, port int, timeout time.Duration) (Result, string, error) {
	return p.check(ctx, nil, scopeOf(p.guard, Target{PodIP: host}), dialTLS{}, host, service, port, timeout)
}

// probeSession runs one plaintext health check of host:port, on s's kept
// connection when keepAlive.
func (p *grpcProber) probeSession(ctx context.Context, s *Session, keepAlive bool, host, service string, port int, timeout time.Duration) (Result, string, error) {
	if !keepAlive {
		s = nil
	}
	return p.check(ctx, s, scopeOf(p.guard, Target{PodIP: host}), dialTLS{}, host, service, port, timeout)
}
