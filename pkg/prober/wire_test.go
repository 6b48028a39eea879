package prober

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
)

// wireServer is a bare TCP server that records each request head exactly as
// it arrived, before any Go HTTP parsing could add, drop or merge headers,
// and answers 200 "ok".
type wireServer struct {
	l    net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	reqs [][]string // request line, then header lines, in wire order
}

func newWireServer(t *testing.T) *wireServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &wireServer{l: l}
	s.wg.Add(1)
	go s.loop()
	t.Cleanup(func() {
		_ = l.Close()
		s.wg.Wait()
	})
	return s
}

func (s *wireServer) loop() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { _ = c.Close() }()
			s.handle(c)
		}()
	}
}

func (s *wireServer) handle(c net.Conn) {
	r := bufio.NewReader(c)
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		lines = append(lines, line)
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, lines)
	s.mu.Unlock()
	_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
}

// requests returns the recorded request heads.
func (s *wireServer) requests() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.reqs...)
}

// port returns the server's port.
func (s *wireServer) port(t *testing.T) int {
	_, p := hostPort(t, s.l.Addr().String())
	return p
}
