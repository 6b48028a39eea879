package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Open opens the network namespace at path (a runtime's bind mount such as
// /var/run/netns/cni-<id>, or /proc/<pid>/ns/net). It refuses a file that
// is not a network namespace.
func Open(path string) (*NS, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("network namespace %s: %w", path, err)
	}
	// NS_GET_NSTYPE (Linux 4.11) says what kind of namespace it is.
	typ, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	if err != nil || typ != unix.CLONE_NEWNET {
		_ = f.Close()
		if err == nil {
			err = errors.New("not a network namespace")
		}
		return nil, fmt.Errorf("network namespace %s: %w", path, err)
	}
	return &NS{f: f, id: ID{Dev: uint64(st.Dev), Ino: st.Ino}, src: path}, nil //nolint:unconvert // Dev is uint32 on some arches
}

// Self returns the identity of the namespace the process's threads are in:
// the main thread's when the process started.
func Self() (ID, error) { return home.id, home.err }

// Of returns the identity of the network namespace at path.
func Of(path string) (ID, error) { return idOf(path) }

func idOf(path string) (ID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return ID{}, err
	}
	return ID{Dev: uint64(st.Dev), Ino: st.Ino}, nil //nolint:unconvert
}

// home is the namespace every thread goes back to: the process's own,
// opened at start-up, before any thread could have left it.
var home struct {
	f   *os.File
	id  ID
	err error
}

func init() {
	// The main goroutine keeps the main thread. A goroutine that ends
	// locked to its thread ends the thread, except the main thread, which
	// the runtime can only park for good: keeping it for the main
	// goroutine means no setns ever runs on it, so a failed way back ends
	// a thread that is not the main one, and /proc/self/ns/net (the main
	// thread's) stays the process's own.
	runtime.LockOSThread()
	home.f, home.err = os.OpenFile("/proc/self/ns/net", os.O_RDONLY|syscall.O_CLOEXEC, 0)
	if home.err == nil {
		var st unix.Stat_t
		if home.err = unix.Fstat(int(home.f.Fd()), &st); home.err == nil {
			home.id = ID{Dev: uint64(st.Dev), Ino: st.Ino} //nolint:unconvert
		}
	}
}

func homeFD() (int, error) {
	if home.err != nil {
		return -1, home.err
	}
	return int(home.f.Fd()), nil
}

// stuckThreads counts threads whose way back failed; each ended with its
// goroutine (tests read it).
var stuckThreads struct {
	sync.Mutex
	n int
}

// StuckThreads returns how many threads could not return from a pod's
// namespace and were ended.
func StuckThreads() int {
	stuckThreads.Lock()
	defer stuckThreads.Unlock()
	return stuckThreads.n
}

// setns is unix.Setns; tests replace it to make the way back fail.
var setns = unix.Setns

// Do runs fn inside the namespace, on a goroutine locked to its own OS
// thread, and waits for it. fn must not start goroutines (they would run
// outside the namespace) nor block for long.
func (n *NS) Do(fn func() error) error {
	if n == nil || n.f == nil {
		return errors.New("no network namespace")
	}
	back, err := homeFD()
	if err != nil {
		return fmt.Errorf("probed's own network namespace: %w", err)
	}
	nsFD := int(n.f.Fd())
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := setns(nsFD, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread() // still home
			done <- fmt.Errorf("entering network namespace %s: %w", n.id, err)
			return
		}
		ferr := fn()
		if err := setns(back, unix.CLONE_NEWNET); err != nil {
			// Stay locked: the goroutine ends locked, and the runtime
			// ends the thread with it.
			stuckThreads.Lock()
			stuckThreads.n++
			stuckThreads.Unlock()
			done <- fmt.Errorf("leaving network namespace %s: %w", n.id, err)
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	err = <-done
	runtime.KeepAlive(n.f)
	return err
}

// Socket makes a non-blocking, close-on-exec socket inside the namespace.
func (n *NS) Socket(domain, typ, proto int) (int, error) {
	fd := -1
	err := n.Do(func() error {
		var err error
		fd, err = unix.Socket(domain, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return os.NewSyscallError("socket", err)
		}
		return nil
	})
	if err != nil && fd >= 0 {
		_ = unix.Close(fd)
		fd = -1
	}
	return fd, err
}

// HasAddr reports whether one of the namespace's interfaces holds addr.
func (n *NS) HasAddr(addr netip.Addr) (bool, error) {
	found := false
	err := n.Do(func() error {
		// InterfaceAddrs reads a netlink dump on this thread: no goroutine.
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if p, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(p.IP); ok && ip.Unmap() == addr.Unmap() {
					found = true
				}
			}
		}
		return nil
	})
	return found, err
}

// DialTCP connects a TCP socket made inside the namespace to addr, as
// net.Dialer would (errors read "dial tcp <addr>: connect: ..." and
// "dial tcp <addr>: i/o timeout"), and returns it as a *net.TCPConn.
// control, if not nil, runs on the socket before connect(2).
func (n *NS) DialTCP(ctx context.Context, addr netip.AddrPort, control func(fd uintptr)) (net.Conn, error) {
	raddr := net.TCPAddrFromAddrPort(addr)
	opErr := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Addr: raddr, Err: err} }
	if err := ctx.Err(); err != nil {
		return nil, opErr(ctxErr(err))
	}
	domain := unix.AF_INET
	var sa unix.Sockaddr
	if a := addr.Addr().Unmap(); a.Is4() {
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: a.As4()}
	} else {
		domain = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: a.As16()}
	}
	fd, err := n.Socket(domain, unix.SOCK_STREAM, unix.IPPROTO_TCP)
	if err != nil {
		return nil, opErr(err)
	}
	if control != nil {
		control(uintptr(fd))
	}
	// connect(2) starts before the socket is registered with the
	// runtime's poller (os.NewFile does that, for a non-blocking socket),
	// as net does: the registration then reports the state the connect
	// is in.
	cerr := unix.Connect(fd, sa)
	f := os.NewFile(uintptr(fd), "tcp:"+addr.String())
	defer func() { _ = f.Close() }() // net.FileConn keeps a dup
	if err := awaitConnect(ctx, f, cerr); err != nil {
		return nil, opErr(err)
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, opErr(err)
	}
	return c, nil
}

// awaitConnect waits, through the poller, until a non-blocking
// connect(2) that returned cerr is done or ctx ends.
func awaitConnect(ctx context.Context, f *os.File, cerr error) error {
	switch cerr {
	case nil:
		return nil
	case unix.EINPROGRESS, unix.EALREADY, unix.EINTR:
	default:
		return os.NewSyscallError("connect", cerr)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = f.SetWriteDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var connErr error
	werr := rc.Write(func(fd uintptr) bool {
		v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			connErr = os.NewSyscallError("getsockopt", err)
			return true
		}
		switch e := syscall.Errno(v); e {
		case 0:
			if _, err := unix.Getpeername(int(fd)); err != nil {
				return false // not connected yet
			}
			return true
		case syscall.EINPROGRESS, syscall.EALREADY, syscall.EINTR:
			return false
		default:
			connErr = os.NewSyscallError("connect", e)
			return true
		}
	})
	if werr != nil {
		if err := ctx.Err(); err != nil {
			return ctxErr(err)
		}
		if errors.Is(werr, os.ErrDeadlineExceeded) {
			return os.ErrDeadlineExceeded
		}
		return werr
	}
	return connErr
}

// errCanceled reads as net's own.
var errCanceled = errors.New("operation was canceled")

// ctxErr maps a context's error as net.Dialer does: a deadline is "i/o
// timeout" (a net.Error whose Timeout() is true).
func ctxErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	return errCanceled
}
