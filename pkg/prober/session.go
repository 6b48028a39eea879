package prober

import (
	"net"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Session is one probe worker's reusable state: its httpGet request,
// rendered once, and for a probe that opts into keep-alive the connection
// kept between two probes; the gRPC prober's own state. The worker owns it
// and closes it when it stops. A nil *Session is valid and keeps nothing.
//
// A Session is used by one worker goroutine at a time; the mutex only
// guards Close racing a probe still in flight.
type Session struct {
	mu       sync.Mutex
	closed   bool
	httpTpl  *httpTemplate
	httpConn *net.TCPConn
	grpc     *grpcSession
}

// NewSession returns an empty Session.
func NewSession() *Session { return &Session{} }

// Close releases whatever the session keeps (kept-alive connections). It is
// safe to call more than once, and on a nil Session.
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
	closeConn(s.httpConn)
	s.grpc.close()
	s.httpTpl, s.httpConn, s.grpc = nil, nil, nil
}

// takeHTTP returns the session's template if it was built from these
// inputs, with the kept connection, which the probe now owns; else nil.
func (s *Session) takeHTTP(action *v1.HTTPGetAction, target Target) (*httpTemplate, *net.TCPConn) {
	if s == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.httpTpl.matches(action, target) {
		return nil, nil
	}
	c := s.httpConn
	s.httpConn = nil
	return s.httpTpl, c
}

// putHTTP keeps t, and c when it is not nil, for the next probe. A template
// for other inputs ends the kept connection, which may lead elsewhere; a
// closed session keeps nothing.
func (s *Session) putHTTP(t *httpTemplate, c *net.TCPConn) {
	if s == nil {
		closeConn(c)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		closeConn(c)
		return
	case s.httpTpl != t:
		closeConn(s.httpConn)
		s.httpTpl, s.httpConn = t, nil
	}
	if s.httpConn == nil {
		s.httpConn = c
	} else {
		closeConn(c)
	}
}

func closeConn(c *net.TCPConn) {
	if c != nil {
		_ = c.Close()
	}
}
