//go:build linux

package prober

import (
	"context"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// TestGuardedDialerSetsLinger: the guarded dialer checks the address and
// still sets SO_LINGER as the plain one does.
func TestGuardedDialerSetsLinger(t *testing.T) {
	l, err := net.Listen("tcp", net.JoinHostPort(podIP, "0"))
	if err != nil {
		t.Skipf("listen: %v", err)
	}
	defer func() { _ = l.Close() }()
	g := guardFor(hostpolicy.DenyNodeLocal)
	c, err := scopeOf(g, podTarget).dialer(true).DialContext(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var linger *unix.Linger
	if err := raw.Control(func(fd uintptr) {
		linger, err = unix.GetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER)
	}); err != nil || linger == nil {
		t.Fatal(err)
	}
	if linger.Onoff != 1 || linger.Linger != 1 {
		t.Errorf("SO_LINGER = %+v; want on, 1s", *linger)
	}
}
