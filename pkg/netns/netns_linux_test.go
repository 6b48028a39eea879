package netns_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probed-dev/probed/pkg/netns"
	"github.com/probed-dev/probed/pkg/netns/netnstest"
)

// A server on the namespace's loopback is reached from inside it, and not
// from the process's own loopback on the same port.
func TestDialTCPReachesTheNamespacesLoopback(t *testing.T) {
	ns := netnstest.New(t)
	l := netnstest.Listen(t, ns, "127.0.0.1:0")
	ap := netip.MustParseAddrPort(l.Addr().String())
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("inside"))
			_ = c.Close()
		}
	}()

	c, err := ns.DialTCP(context.Background(), ap, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, _ := c.Read(buf)
	_ = c.Close()
	if string(buf[:n]) != "inside" {
		t.Errorf("read %q; want the namespace's server", buf[:n])
	}
	if _, ok := c.(*net.TCPConn); !ok {
		t.Errorf("conn is %T; want *net.TCPConn", c)
	}

	if c, err := net.DialTimeout("tcp", ap.String(), time.Second); err == nil {
		_ = c.Close()
		t.Skipf("something on the host listens on %s too", ap)
	}
}

// Errors read as net.Dialer's: what a probe's output quotes.
func TestDialTCPErrorsReadAsNets(t *testing.T) {
	ns := netnstest.New(t)
	l := netnstest.Listen(t, ns, "127.0.0.1:0")
	ap := netip.MustParseAddrPort(l.Addr().String())
	_ = l.Close()

	_, err := ns.DialTCP(context.Background(), ap, nil)
	if want := "dial tcp " + ap.String() + ": connect: connection refused"; err == nil || err.Error() != want {
		t.Errorf("refused: %v; want %q", err, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = ns.DialTCP(ctx, ap, nil)
	if want := "dial tcp " + ap.String() + ": operation was canceled"; err == nil || err.Error() != want {
		t.Errorf("canceled: %v; want %q", err, want)
	}

	// Only lo is in the namespace: anything else is unreachable at once.
	far := netip.MustParseAddrPort("10.255.255.1:80")
	_, err = ns.DialTCP(context.Background(), far, nil)
	if err == nil || !strings.Contains(err.Error(), "network is unreachable") {
		t.Errorf("unreachable: %v", err)
	}
}

// The control hook sees the socket before connect(2).
func TestDialTCPControl(t *testing.T) {
	ns := netnstest.New(t)
	l := netnstest.Listen(t, ns, "127.0.0.1:0")
	called := false
	c, err := ns.DialTCP(context.Background(), netip.MustParseAddrPort(l.Addr().String()), func(fd uintptr) { called = fd > 0 })
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if !called {
		t.Error("control not called with the socket")
	}
}

// Many dials into several namespaces at once leave every thread home.
func TestNoThreadLeftInANamespace(t *testing.T) {
	var spaces []*netns.NS
	var addrs []netip.AddrPort
	for range 3 {
		ns := netnstest.New(t)
		l := netnstest.Listen(t, ns, "127.0.0.1:0")
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
		spaces = append(spaces, ns)
		addrs = append(addrs, netip.MustParseAddrPort(l.Addr().String()))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				k := (g + i) % len(spaces)
				c, err := spaces[k].DialTCP(context.Background(), addrs[k], nil)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				_ = c.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	out, err := netnstest.ThreadsOutside()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 0 {
		t.Fatalf("threads left outside probed's namespace: %v", out)
	}
}

// Open refuses what is not a network namespace.
func TestOpenRefusesOtherFiles(t *testing.T) {
	for _, p := range []string{"/proc/self/ns/uts", "/etc/hostname"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if ns, err := netns.Open(p); err == nil {
			_ = ns.Close()
			t.Errorf("Open(%s) succeeded", p)
		}
	}
	if _, err := netns.Open("/nonexistent/netns"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of a missing path: %v", err)
	}
}
