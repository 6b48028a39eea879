package prober

import (
	"net"

	v1 "k8s.io/api/core/v1"
)

// httpSession is the HTTP probe's per-worker state: the request template
// and, in keep-alive mode, the idle connection between two probes.
type httpSession struct {
	tpl  *httpTemplate
	conn *net.TCPConn
}

func (h *httpSession) close() {
	if h != nil && h.conn != nil {
		_ = h.conn.Close()
		h.conn = nil
	}
}

// httpTemplate returns the session's template if it was built from these
// inputs, else nil. A nil or closed session keeps none.
func (s *Session) httpTemplate(action *v1.HTTPGetAction, target Target) *httpTemplate {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http == nil || !s.http.tpl.matches(action, target) {
		return nil
	}
	return s.http.tpl
}

// setHTTPTemplate keeps t for the next probes; a template for other inputs
// also ends the kept connection, which may lead elsewhere.
func (s *Session) setHTTPTemplate(t *httpTemplate) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.http == nil {
		s.http = &httpSession{}
	}
	s.http.close()
	s.http.tpl = t
}

// takeHTTPConn hands the kept connection, if any, to the probe now running.
func (s *Session) takeHTTPConn() *net.TCPConn {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http == nil {
		return nil
	}
	c := s.http.conn
	s.http.conn = nil
	return c
}

// keepHTTPConn keeps c for the next probe built from t, or closes it when
// the session closed or moved on meanwhile.
func (s *Session) keepHTTPConn(t *httpTemplate, c *net.TCPConn) {
	if s != nil {
		s.mu.Lock()
		ok := !s.closed && s.http != nil && s.http.tpl == t && s.http.conn == nil
		if ok {
			s.http.conn = c
		}
		s.mu.Unlock()
		if ok {
			return
		}
	}
	_ = c.Close()
}
