package endpoints

import (
	"net"
	"sync"

	"k8s.io/klog/v2"
)

// perSourceListener closes, at once, a connection from a remote address
// that already holds max open ones. Under a global cap (netutil's
// LimitListener waits for a free place before it accepts), a refused
// connection never takes one of those places.
type perSourceListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

func limitPerSource(ln net.Listener, max int) net.Listener {
	return &perSourceListener{Listener: ln, max: max, open: map[string]int{}}
}

func (l *perSourceListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c.RemoteAddr())
		l.mu.Lock()
		full := l.open[src] >= l.max
		if !full {
			l.open[src]++
		}
		l.mu.Unlock()
		if full {
			klog.V(4).InfoS("Endpoint connection refused: too many from one address", "remote", src, "max", l.max)
			_ = c.Close()
			continue
		}
		return &sourceConn{Conn: c, release: sync.OnceFunc(func() { l.release(src) })}, nil
	}
}

func (l *perSourceListener) release(src string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[src]--; l.open[src] <= 0 {
		delete(l.open, src)
	}
}

// sourceOf is a connection's remote IP address, or its whole address when
// it has none.
func sourceOf(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return a.String()
}

// sourceConn gives its source's place back when it closes.
type sourceConn struct {
	net.Conn
	release func()
}

func (c *sourceConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
