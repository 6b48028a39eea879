package prober

import "sync"

// Session is one probe worker's reusable state: request templates and, for
// probes that opt into keep-alive, the kept connection. The worker owns it
// and closes it when it stops. A nil *Session is valid and keeps nothing, so
// every call then builds its state afresh.
//
// A Session is used by one worker goroutine at a time; the mutex only
// guards Close racing a probe still in flight.
type Session struct {
	mu     sync.Mutex
	closed bool
	http   *httpSession
	grpc   *grpcSession
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
	s.http.close()
	s.grpc.close()
	s.http, s.grpc = nil, nil
}
