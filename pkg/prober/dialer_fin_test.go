package prober

import (
	"context"
	"net"
	"net/netip"
	"testing"
)

// TestFINDialerChecksEveryDial: the dialer of the TCP prober and the HTTP
// fast path applies the host policy at connect time, by itself, whatever
// the caller checked before: a node-local address is refused in scope, and
// any address without a scope.
func TestFINDialerChecksEveryDial(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	ap := netip.MustParseAddrPort(l.Addr().String())
	g := guardFor(HostPolicyDenyNodeLocal)
	d := newFINDialer(g)

	ctx := withDialScope(context.Background(), g, Target{PodIP: "10.0.0.9"})
	if c, err := d.DialTCP(ctx, "tcp", netip.AddrPort{}, ap); !isRefused(err) {
		if c != nil {
			_ = c.Close()
		}
		t.Errorf("loopback dial in a pod's scope: %v; want refused", err)
	}
	if _, err := d.DialContext(context.Background(), "tcp", ap.String()); !isRefused(err) {
		t.Errorf("dial without scope: %v; want refused", err)
	}
	// The pod's own IP is allowed, loopback included.
	ctx = withDialScope(context.Background(), g, Target{PodIP: "127.0.0.1"})
	c, err := d.DialTCP(ctx, "tcp", netip.AddrPort{}, ap)
	if err != nil {
		t.Fatalf("dial of the pod IP: %v", err)
	}
	_ = c.Close()
}
