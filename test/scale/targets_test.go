//go:build scale

package scale

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// site is one simulated node's pod network: an HTTP server on the node's own
// 127.x address that every pod of the node probes, on per-pod paths
// (/ready/<pod>, /live/<pod>). A path answers 200 unless the test has marked
// it failing, then 503, or holds it (hold, release).
type site struct {
	IP   string
	Port int

	mu      sync.RWMutex
	failing map[string]bool
	held    map[string]*heldPath
}

// heldPath parks a path's requests until released, then answers them 503:
// how a test makes probes on several nodes fail at the same instant.
type heldPath struct {
	parked  atomic.Int32
	release chan struct{}
}

func startSite(t *testing.T, ip string) *site {
	t.Helper()
	s := &site{IP: ip, failing: map[string]bool{}, held: map[string]*heldPath{}}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s.Port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	bad := s.failing[r.URL.Path]
	h := s.held[r.URL.Path]
	s.mu.RUnlock()
	if h != nil {
		h.parked.Add(1)
		select {
		case <-h.release:
			bad = true
		case <-r.Context().Done():
			return
		}
	}
	if bad {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprint(w, "failing")
		return
	}
	_, _ = fmt.Fprint(w, "ok")
}

// setFailing marks paths failing (true) or healthy (false).
func (s *site) setFailing(v bool, paths ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range paths {
		if v {
			s.failing[p] = true
		} else {
			delete(s.failing, p)
		}
	}
}

// hold parks the path's requests from now on (see heldPath).
func (s *site) hold(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[path] = &heldPath{release: make(chan struct{})}
}

// parked is how many requests for path are parked (0 once it is released).
func (s *site) parked(path string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if h := s.held[path]; h != nil {
		return int(h.parked.Load())
	}
	return 0
}

// release answers the path's parked requests 503 now, and the ones after
// as before the hold.
func (s *site) release(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[path]; h != nil {
		close(h.release)
		delete(s.held, path)
	}
}

// siteIP gives node i its own loopback address, 127.30.x.y.
func siteIP(i int) string { return fmt.Sprintf("127.30.%d.%d", i/250, i%250+1) }
