package prober

import (
	"net/http"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// Session is one probe worker's state kept between its probes: the HTTP
// Transport of a probe whose dialer the host policy binds to its pod or
// that keeps its connection alive ("probed.io/keepAlive"), and a kept-alive
// gRPC probe's ClientConn. The worker owns it and closes it when it stops.
// A nil *Session is valid and keeps nothing.
//
// A Session is used by one worker goroutine at a time; the mutex only
// guards Close racing a probe still in flight.
type Session struct {
	mu     sync.Mutex
	closed bool
	http   *sessionTransport
	grpc   *grpcSession
}

// sessionTransport is a Transport and what it was built for.
type sessionTransport struct {
	t              *http.Transport
	sc             scope
	h2c, keepAlive bool
}

// grpcSession is a kept-alive gRPC probe's ClientConn, to addr.
type grpcSession struct {
	conn   *grpc.ClientConn
	addr   string
	useTLS bool
}

// NewSession returns an empty Session.
func NewSession() *Session { return &Session{} }

// Close releases whatever the session keeps (its Transport's idle
// connections, a kept ClientConn). It is safe to call more than once, and
// on a nil Session.
func (s *Session) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.http != nil {
		s.http.t.CloseIdleConnections()
	}
	if g := s.grpc; g != nil && g.conn != nil {
		_ = g.conn.Close()
		g.conn = nil
	}
}

// httpTransport returns the session's Transport for these inputs, made
// when it has none or one for others (the old one's connections are
// closed); a nil Session makes one for the probe alone. Pass it to
// releaseHTTP after the probe.
func (s *Session) httpTransport(sc scope, h2c, keepAlive bool) *http.Transport {
	if s == nil {
		return newTransport(sc, h2c, keepAlive)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.http; st != nil && st.h2c == h2c && st.keepAlive == keepAlive &&
		st.sc.guard == sc.guard && slices.Equal(st.sc.podIPs, sc.podIPs) {
		return st.t
	}
	if s.http != nil {
		s.http.t.CloseIdleConnections()
	}
	s.http = &sessionTransport{t: newTransport(sc, h2c, keepAlive), sc: sc, h2c: h2c, keepAlive: keepAlive}
	return s.http.t
}

// releaseHTTP closes t's idle connections unless the session keeps t:
// a probe that ran without a Session, raced Close, or outlived its
// Transport leaves no connection behind.
func (s *Session) releaseHTTP(t *http.Transport) {
	if s != nil {
		s.mu.Lock()
		kept := !s.closed && s.http != nil && s.http.t == t
		s.mu.Unlock()
		if kept {
			return
		}
	}
	if t.DisableKeepAlives {
		return // it never keeps one (the shared Transports among them)
	}
	t.CloseIdleConnections()
}

// grpcState returns the session's gRPC state, or nil for a nil or closed
// Session.
func (s *Session) grpcState() *grpcSession {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.grpc == nil {
		s.grpc = &grpcSession{}
	}
	return s.grpc
}

// takeGRPC hands over the kept ClientConn to addr, if there is one that
// has not failed; a probe that takes it gives it back with keepGRPC. A
// ClientConn to another address, or in TRANSIENT_FAILURE, is closed: the
// probe dials anew, as the kubelet does for every probe.
func (s *Session) takeGRPC(addr string, useTLS bool) *grpc.ClientConn {
	g := s.grpcState()
	if g == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := g.conn
	g.conn = nil
	if c == nil {
		return nil
	}
	if g.addr != addr || g.useTLS != useTLS || c.GetState() == connectivity.TransientFailure {
		_ = c.Close()
		return nil
	}
	return c
}

// keepGRPC keeps c for the worker's next probe, or closes it when the
// session is closed or nil.
func (s *Session) keepGRPC(addr string, useTLS bool, c *grpc.ClientConn) {
	g := s.grpcState()
	if g == nil {
		_ = c.Close()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || g.conn != nil {
		_ = c.Close()
		return
	}
	g.conn, g.addr, g.useTLS = c, addr, useTLS
}
