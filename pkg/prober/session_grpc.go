package prober

import "sync"

// grpcSession is the gRPC probe's per-worker state: the request template
// of the worker's last probe and, for a probe with keep-alive, its
// connection.
type grpcSession struct {
	mu     sync.Mutex
	closed bool
	tmpl   *grpcTemplate
	// conn is the kept connection to addr; nil while a probe uses it.
	conn *h2conn
	addr string
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

func (g *grpcSession) template(authority, service, userAgent string) *grpcTemplate {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.tmpl; t != nil && t.authority == authority && t.service == service {
		return t
	}
	g.tmpl = newGRPCTemplate(authority, service, userAgent)
	return g.tmpl
}

// take hands over the kept connection to addr, if any. A connection to
// another address is closed: the worker's target moved.
func (g *grpcSession) take(addr string) *h2conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.conn
	g.conn = nil
	if c != nil && g.addr != addr {
		c.close(false)
		return nil
	}
	return c
}

// keep stores c for the next probe, or closes it when the session was
// closed meanwhile or already holds one.
func (g *grpcSession) keep(addr string, c *h2conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.conn != nil {
		c.close(false)
		return
	}
	g.conn, g.addr = c, addr
}

func (g *grpcSession) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.conn != nil {
		g.conn.close(false)
		g.conn = nil
	}
}
