// Command tcp-variants is an exploratory tool, not part of `make bench`: it
// measures the CPU of one TCP probe (connect, then close) done several ways
// against a loopback port, to size the options for pkg/prober's TCP path.
//
//	tcp-variants -port P [-n 5000] [-variant NAME]
//
// Variants:
//
//	net          net.Dialer{Control: SO_LINGER 1s}.DialContext, as probed and the kubelet do
//	net-nokeep   the same with KeepAlive: -1 (no SO_KEEPALIVE/TCP_KEEP* setsockopts)
//	dialtcp      Go 1.26's Dialer.DialTCP with a pre-parsed netip.AddrPort, KeepAlive -1
//	net-rst      dialtcp with SO_LINGER 0: Close sends an RST (no FIN exchange, no TIME_WAIT)
//	raw          socket, SO_LINGER 1s, non-blocking connect, poll, SO_ERROR, close: no netpoller
//	raw-rst      raw, but SO_LINGER 0 at close: an RST, no FIN exchange, no TIME_WAIT
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"
)

func lingerControl(sec int) func(string, string, syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: int32(sec)})
		})
	}
}

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

// rawProbe connects with plain syscalls, waiting in poll(2) (one blocking
// syscall on this thread) instead of the netpoller.
func rawProbe(sa *syscall.SockaddrInet4, timeout time.Duration, rst bool) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() {
		if rst {
			_ = syscall.SetsockoptLinger(fd, syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
		}
		_ = syscall.Close(fd)
	}()
	if !rst {
		_ = syscall.SetsockoptLinger(fd, syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 1})
	}
	err = syscall.Connect(fd, sa)
	if err == nil {
		return nil
	}
	if err != syscall.EINPROGRESS {
		return err
	}
	p := pollFd{fd: int32(fd), events: 0x4 /* POLLOUT */}
	_, _, e := syscall.Syscall(syscall.SYS_POLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(timeout.Milliseconds()))
	if e != 0 {
		return e
	}
	v, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ERROR)
	if err != nil {
		return err
	}
	if v != 0 {
		return syscall.Errno(v)
	}
	return nil
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	port := flag.Int("port", 0, "target port on 127.0.0.1")
	n := flag.Int("n", 5000, "probes per variant")
	only := flag.String("variant", "", "run only this variant (each variant is best run in its own fresh network namespace: connections use up ephemeral ports)")
	flag.Parse()
	addr := fmt.Sprintf("127.0.0.1:%d", *port)
	ap := netip.MustParseAddrPort(addr)
	sa := &syscall.SockaddrInet4{Port: *port, Addr: [4]byte{127, 0, 0, 1}}
	ctx := context.Background()
	timeout := time.Second

	d1 := &net.Dialer{Control: lingerControl(1)}
	d2 := &net.Dialer{Control: lingerControl(1), KeepAlive: -1}
	d3 := &net.Dialer{Control: lingerControl(0), KeepAlive: -1}
	variants := []struct {
		name string
		f    func() error
	}{
		{"net", func() error {
			c, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			conn, err := d1.DialContext(c, "tcp", addr)
			if err != nil {
				return err
			}
			return conn.Close()
		}},
		{"net-nokeep", func() error {
			c, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			conn, err := d2.DialContext(c, "tcp", addr)
			if err != nil {
				return err
			}
			return conn.Close()
		}},
		{"dialtcp", func() error {
			c, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			conn, err := d2.DialTCP(c, "tcp", netip.AddrPort{}, ap)
			if err != nil {
				return err
			}
			return conn.Close()
		}},
		{"net-rst", func() error {
			c, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			conn, err := d3.DialTCP(c, "tcp", netip.AddrPort{}, ap)
			if err != nil {
				return err
			}
			return conn.Close()
		}},
		{"raw", func() error { return rawProbe(sa, timeout, false) }},
		{"raw-rst", func() error { return rawProbe(sa, timeout, true) }},
	}
	for round := 0; round < 2; round++ { // the second round is reported
		for _, v := range variants {
			if *only != "" && v.name != *only {
				continue
			}
			for i := 0; i < 200; i++ {
				_ = v.f()
			}
			c0, t0 := cpu(), time.Now()
			errs := 0
			for i := 0; i < *n; i++ {
				if err := v.f(); err != nil {
					errs++
				}
			}
			c, wall := cpu()-c0, time.Since(t0)
			if round == 1 {
				fmt.Printf("%-11s %6.1f us CPU/probe  %6.1f us wall/probe  errors %d\n", v.name,
					float64(c.Microseconds())/float64(*n), float64(wall.Microseconds())/float64(*n), errs)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	os.Exit(0)
}
