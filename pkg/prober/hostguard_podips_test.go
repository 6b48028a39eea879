package prober

import (
	"context"
	"net/netip"
	"testing"
)

// Issue 30, item 4: a verified target's pod IP is allowed as the pod's own
// only if it is among its verified IPs; without verification, as before.
// Checked on the dialer's control hook, before any socket connects.
func TestVerifiedPodIPsAloneAreThePods(t *testing.T) {
	g := NewHostGuard(HostPolicyDenyNodeLocal, HostGuardOptions{InterfaceAddrs: staticAddrs("10.9.9.9")})
	check := func(target Target, addr string) error {
		return GuardedDialer(g, target).ControlContext(context.Background(), "tcp", netip.AddrPortFrom(netip.MustParseAddr(addr), 80).String(), nil)
	}
	for _, spoofed := range []string{"169.254.169.254", "127.0.0.1", "168.63.129.16", "fd00:ec2::254"} {
		target := Target{PodIP: spoofed, PodIPs: []string{spoofed}}
		if err := check(target, spoofed); err != nil {
			t.Errorf("unverified %s: %v; want allowed, as status.podIPs always were", spoofed, err)
		}
		target = Target{PodIP: spoofed, PodIPs: []string{"10.1.0.5"}, PodIPsVerified: true}
		if err := check(target, spoofed); !IsRefused(err) {
			t.Errorf("verified IPs 10.1.0.5, pod IP %s: %v; want refused", spoofed, err)
		}
	}
	own := Target{PodIP: "127.0.0.9", PodIPs: []string{"127.0.0.9"}, PodIPsVerified: true}
	if err := check(own, "127.0.0.9"); err != nil {
		t.Errorf("a verified pod IP: %v", err)
	}
	if err := check(Target{PodIP: "127.0.0.9", PodIPsVerified: true}, "127.0.0.9"); !IsRefused(err) {
		t.Errorf("no verified IPs: %v; want refused", err)
	}
}

// A hostNetwork pod's own IPs are the Node's status addresses, or its
// interfaces' while those are unknown; never a fixed node-local address.
func TestIsNodeAddr(t *testing.T) {
	ifaces := staticAddrs("127.0.0.1", "::1", "10.9.9.9", "169.254.10.1", "10.244.0.1")
	for _, policy := range []HostPolicy{HostPolicyDenyNodeLocal, HostPolicyPodIPs} {
		g := NewHostGuard(policy, HostGuardOptions{InterfaceAddrs: ifaces,
			NodeAddrs: func(context.Context) ([]netip.Addr, error) { return addrs("10.9.9.9", "203.0.113.7"), nil }})
		for addr, want := range map[string]bool{"10.9.9.9": true, "10.244.0.1": true, "203.0.113.7": false, "127.0.0.1": false, "169.254.10.1": false, "169.254.169.254": false, "10.1.0.5": false} {
			if got := g.IsNodeAddr(netip.MustParseAddr(addr)); got != want {
				t.Errorf("%s, interfaces only: IsNodeAddr(%s) = %v, want %v", policy, addr, got, want)
			}
		}
		g.Refresh(context.Background())
		for addr, want := range map[string]bool{"10.9.9.9": true, "203.0.113.7": true, "::ffff:10.9.9.9": true, "10.244.0.1": false, "127.0.0.1": false} {
			if got := g.IsNodeAddr(netip.MustParseAddr(addr)); got != want {
				t.Errorf("%s, with the Node's: IsNodeAddr(%s) = %v, want %v", policy, addr, got, want)
			}
		}
	}
	if NewHostGuard(HostPolicyKubelet, HostGuardOptions{InterfaceAddrs: ifaces}).IsNodeAddr(netip.MustParseAddr("10.9.9.9")) {
		t.Error("the kubelet policy checks nothing, so knows no node address")
	}
}
