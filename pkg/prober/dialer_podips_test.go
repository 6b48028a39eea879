package prober

import (
	"context"
	"net/netip"
	"testing"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// Issue 30, item 4: a verified target's pod IP is allowed as the pod's own
// only if it is among its verified IPs; without verification, as before.
// Checked on the dialer's control hook, before any socket connects.
func TestVerifiedPodIPsAloneAreThePods(t *testing.T) {
	g := hostpolicy.NewGuard(hostpolicy.DenyNodeLocal, hostpolicy.GuardOptions{InterfaceAddrs: staticAddrs("10.9.9.9")})
	check := func(target Target, addr string) error {
		return GuardedDialer(g, target).ControlContext(context.Background(), "tcp", netip.AddrPortFrom(netip.MustParseAddr(addr), 80).String(), nil)
	}
	for _, spoofed := range []string{"169.254.169.254", "127.0.0.1", "168.63.129.16", "fd00:ec2::254"} {
		target := Target{PodIP: spoofed, PodIPs: []string{spoofed}}
		if err := check(target, spoofed); err != nil {
			t.Errorf("unverified %s: %v; want allowed, as status.podIPs always were", spoofed, err)
		}
		target = Target{PodIP: spoofed, PodIPs: []string{"10.1.0.5"}, PodIPsVerified: true}
		if err := check(target, spoofed); !hostpolicy.IsRefused(err) {
			t.Errorf("verified IPs 10.1.0.5, pod IP %s: %v; want refused", spoofed, err)
		}
	}
	own := Target{PodIP: "127.0.0.9", PodIPs: []string{"127.0.0.9"}, PodIPsVerified: true}
	if err := check(own, "127.0.0.9"); err != nil {
		t.Errorf("a verified pod IP: %v", err)
	}
	if err := check(Target{PodIP: "127.0.0.9", PodIPsVerified: true}, "127.0.0.9"); !hostpolicy.IsRefused(err) {
		t.Errorf("no verified IPs: %v; want refused", err)
	}
}
