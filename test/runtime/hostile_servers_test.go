//go:build runtime

package runtimetest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostileServer is a loopback TCP server that hands every connection to
// handle, and on cleanup closes the listener and every open connection and
// waits for its handlers.
type hostileServer struct {
	ln     net.Listener
	port   int
	handle func(c net.Conn)
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

func newHostileServer(t testing.TB, handle func(c net.Conn)) *hostileServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &hostileServer{ln: ln, port: ln.Addr().(*net.TCPAddr).Port, handle: handle, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *hostileServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				_ = c.Close()
			}()
			s.handle(c)
		}()
	}
}

func (s *hostileServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// readRequestHead consumes an HTTP request head, so that the response is not
// lost to a reset caused by unread input.
func readRequestHead(c net.Conn) error {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if line == "\r\n" || line == "\n" {
			return nil
		}
	}
}

// bigBodyServer answers 200 (or status) with a 1 GiB body streamed from one
// 32 KiB buffer, so it never holds the body either. sent counts what was
// written, to show the prober stopped reading.
func bigBodyServer(t testing.TB, status int) (*hostileServer, *atomic.Int64) {
	var sent atomic.Int64
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	s := newHostileServer(t, func(c net.Conn) {
		if readRequestHead(c) != nil {
			return
		}
		const size = 1 << 30
		if _, err := fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: %d\r\n\r\n", status, http.StatusText(status), size); err != nil {
			return
		}
		for n := 0; n < size; n += len(chunk) {
			w, err := c.Write(chunk)
			sent.Add(int64(w))
			if err != nil {
				return
			}
		}
	})
	return s, &sent
}

// trickle writes prefix, then one byte of b every interval until the
// connection fails (the prober hung up or the server closed).
func trickle(c net.Conn, prefix string, b byte, interval time.Duration) {
	if _, err := c.Write([]byte(prefix)); err != nil {
		return
	}
	for {
		time.Sleep(interval)
		if _, err := c.Write([]byte{b}); err != nil {
			return
		}
	}
}

// slowlorisServer sends its status line, then trickles one header byte at a
// time, never ending the header block.
func slowlorisServer(t testing.TB) *hostileServer {
	return newHostileServer(t, func(c net.Conn) {
		if readRequestHead(c) == nil {
			trickle(c, "HTTP/1.1 200 OK\r\nX-Slow: ", 'a', 50*time.Millisecond)
		}
	})
}

// slowBodyServer sends whole headers, then trickles the body.
func slowBodyServer(t testing.TB) *hostileServer {
	return newHostileServer(t, func(c net.Conn) {
		if readRequestHead(c) == nil {
			trickle(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", 'b', 50*time.Millisecond)
		}
	})
}

// tlsGarbageServer answers a TLS ClientHello with n seeded random bytes
// (prefix first), then holds the connection until the client leaves.
func tlsGarbageServer(t testing.TB, prefix []byte, n int) *hostileServer {
	return newHostileServer(t, func(c net.Conn) {
		rng := rand.New(rand.NewPCG(1, 2))
		garbage := make([]byte, n)
		for i := range garbage {
			garbage[i] = byte(rng.Uint32())
		}
		copy(garbage, prefix)
		if _, err := c.Write(garbage); err != nil {
			return
		}
		drain(c)
	})
}

// silentServer accepts and reads, and never writes a byte: for gRPC, no
// HTTP/2 preface ever comes.
func silentServer(t testing.TB) *hostileServer {
	return newHostileServer(t, drain)
}

func drain(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// redirectChain starts n loopback servers, each on its own port; server i
// redirects to server i+1 and the last answers 200 "end of chain". It
// returns their ports, first to last.
func redirectChain(t testing.TB, n int) []int {
	ports := make([]int, n)
	servers := make([]*httptest.Server, n)
	for i := n - 1; i >= 0; i-- {
		next := 0
		if i < n-1 {
			next = ports[i+1]
		}
		servers[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if next == 0 {
				_, _ = w.Write([]byte("end of chain"))
				return
			}
			http.Redirect(w, r, "http://127.0.0.1:"+strconv.Itoa(next)+"/hop"+strconv.Itoa(i+1), http.StatusFound)
		}))
		t.Cleanup(servers[i].Close)
		ports[i] = servers[i].Listener.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// redirectLoop starts two servers that redirect to each other forever.
func redirectLoop(t testing.TB) int {
	var other atomic.Int64
	loop := func(self *atomic.Int64) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.1:"+strconv.Itoa(int(self.Load()))+"/loop", http.StatusTemporaryRedirect)
		})
	}
	var aPort atomic.Int64
	a := httptest.NewServer(loop(&other))
	t.Cleanup(a.Close)
	aPort.Store(int64(a.Listener.Addr().(*net.TCPAddr).Port))
	b := httptest.NewServer(loop(&aPort))
	t.Cleanup(b.Close)
	other.Store(int64(b.Listener.Addr().(*net.TCPAddr).Port))
	return int(aPort.Load())
}
