//go:build linux

// Package netnstest makes throwaway network namespaces for tests: what a
// pod's sandbox is to probed, with its loopback up. It needs root
// (CAP_SYS_ADMIN); tests skip without it.
package netnstest

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/probed-dev/probed/pkg/netns"
)

// New returns a new network namespace with its loopback up, pinned by a
// bind mount under t.TempDir() (so it can be opened by path, as a
// runtime's /var/run/netns/cni-<id>), and removed when the test ends.
func New(t testing.TB) *netns.NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SYS_ADMIN) to make a network namespace")
	}
	path := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Unlocked only when the thread is back home; otherwise it ends
		// with this goroutine.
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer func() { _ = home.Close() }()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		err = unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, "")
		if err == nil {
			err = loopbackUp()
		}
		if berr := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); berr != nil {
			errc <- fmt.Errorf("back home: %w", berr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	ns, err := netns.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ns.Close()
		_ = unix.Unmount(path, unix.MNT_DETACH)
	})
	return ns
}

// loopbackUp brings lo up in the calling thread's namespace, as the CNI
// loopback plugin does in a pod's.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// Listen returns a TCP listener made inside ns on addr (for example
// "127.0.0.1:0"): a server that only the namespace can reach.
func Listen(t testing.TB, ns *netns.NS, addr string) net.Listener {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	domain := unix.AF_INET
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	if ap.Addr().Is6() {
		domain = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	fd, err := ns.Socket(domain, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, sa); err != nil {
		_ = unix.Close(fd)
		t.Fatalf("bind %s: %v", addr, err)
	}
	// The backlog Go's net.Listen asks for (somaxconn's default): a small one
	// drops SYNs under a benchmark's load, and the client then waits 1s.
	if err := unix.Listen(fd, 4096); err != nil {
		_ = unix.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	l, err := net.FileListener(f)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// ThreadsOutside returns the threads of this process whose network
// namespace is not the process's own (/proc/self/task/*/ns/net), as
// "tid net:[inode]"; none when every thread is home.
func ThreadsOutside() ([]string, error) {
	self, err := netns.Self()
	if err != nil {
		return nil, err
	}
	tasks, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range tasks {
		id, err := netns.Of(p)
		if err != nil {
			continue // the thread ended
		}
		if id != self {
			out = append(out, filepath.Base(filepath.Dir(filepath.Dir(p)))+" "+id.String())
		}
	}
	return out, nil
}
