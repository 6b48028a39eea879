//go:build runtime

package runtimetest

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// socketRelay stands in for the runtime socket: a unix socket at path that
// forwards every connection to containerd's. cut removes the socket file and
// drops every connection, as a runtime that goes away does; up brings it
// back. The shared containerd itself keeps running, so tests running next to
// this one are not disturbed.
type socketRelay struct {
	t        testing.TB
	path     string
	upstream string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newSocketRelay returns a relay that is not yet listening. The dir is short:
// a unix socket path must fit in 108 bytes.
func newSocketRelay(t testing.TB, upstream string) *socketRelay {
	t.Helper()
	dir, err := os.MkdirTemp("", "rtsock")
	if err != nil {
		t.Fatal(err)
	}
	r := &socketRelay{t: t, path: filepath.Join(dir, "rt.sock"), upstream: upstream, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		r.close()
		_ = os.RemoveAll(dir)
	})
	return r
}

func (r *socketRelay) endpoint() string { return "unix://" + r.path }

func (r *socketRelay) up() {
	r.t.Helper()
	ln, err := net.Listen("unix", r.path)
	if err != nil {
		r.t.Fatalf("relay listen: %v", err)
	}
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("unix", r.upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			r.mu.Lock()
			r.conns[c], r.conns[u] = struct{}{}, struct{}{}
			r.mu.Unlock()
			r.wg.Add(2)
			go r.copy(u, c)
			go r.copy(c, u)
		}
	}()
}

func (r *socketRelay) copy(dst, src net.Conn) {
	defer r.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	r.mu.Lock()
	delete(r.conns, dst)
	delete(r.conns, src)
	r.mu.Unlock()
}

// cut closes the listener (which removes the socket file) and every
// connection through it.
func (r *socketRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		_ = r.ln.Close()
		r.ln = nil
	}
	for c := range r.conns {
		_ = c.Close()
	}
	_ = os.Remove(r.path)
}

// close cuts the relay and waits for its goroutines.
func (r *socketRelay) close() {
	r.cut()
	r.wg.Wait()
}
