package prober

import (
	"crypto/tls"
	"net/http"
	"sync"

	"google.golang.org/grpc"
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
	// tls is the worker's verified-TLS material (tls.go), peer what its
	// last handshake showed.
	tls  *tlsMaterial
	peer *TLSPeer
}

// sessionTransport is a Transport and what it was built for.
type sessionTransport struct {
	t              *http.Transport
	sc             scope
	h2c, keepAlive bool
	tls            *tls.Config
}

// grpcSession is a kept-alive gRPC probe's ClientConn, to addr.
type grpcSession struct {
	conn   *grpc.ClientConn
	addr   string
	useTLS bool
	tls    *tls.Config
	// creds are conn's probed.io/tls credentials; nil without.
	creds *handshakeCreds
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
