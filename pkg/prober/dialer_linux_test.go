//go:build linux

package prober

import (
	"context"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProbeDialerSetsLinger: probe sockets linger 1s, as the kubelet's do.
func TestProbeDialerSetsLinger(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	c, err := scope{}.dialer(true).DialContext(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var linger *unix.Linger
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		linger, gerr = unix.GetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	if linger.Onoff != 1 || linger.Linger != 1 {
		t.Errorf("SO_LINGER = %+v; want on, 1s", *linger)
	}
}
