package hostpolicy

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(s))
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// staticAddrs is an InterfaceAddrs that returns a fixed list.
func staticAddrs(s ...string) func() ([]netip.Addr, error) {
	return func() ([]netip.Addr, error) { return addrs(s...), nil }
}

func TestParseHostPolicy(t *testing.T) {
	for in, want := range map[string]Policy{
		"":                DenyNodeLocal,
		"deny-node-local": DenyNodeLocal,
		"pod-ips":         PodIPs,
		"kubelet":         Kubelet,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"Kubelet", "none", "deny"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	var p Policy
	if p.String() != "deny-node-local" {
		t.Errorf("zero Policy prints %q", p.String())
	}
	if err := p.Set("pod-ips"); err != nil || p != PodIPs {
		t.Errorf("Set = %v, %q", err, p)
	}
}

// TestHostGuardRules walks every rule of every policy, address by address.
func TestHostGuardRules(t *testing.T) {
	node := staticAddrs("127.0.0.1", "::1", "10.20.0.7", "fe80::1", "2001:db8::7")
	deny := NewGuard(DenyNodeLocal, GuardOptions{InterfaceAddrs: node})
	podOnly := NewGuard(PodIPs, GuardOptions{InterfaceAddrs: node})
	kubelet := NewGuard(Kubelet, GuardOptions{InterfaceAddrs: node})
	var none *Guard
	pod := addrs("127.0.0.9", "fd00::9")

	const (
		ok       = ""
		linkLoc  = "link-local/metadata"
		loopback = "loopback"
		unspec   = "unspecified"
		nodeAddr = "an address of this node"
		notPod   = "not one of the pod's IPs"
	)
	cases := []struct {
		addr         string
		deny, podIPs string // expected reason fragment, "" = allowed
	}{
		// The pod's own IPs are always allowed, even on loopback.
		{"127.0.0.9", ok, ok},
		{"fd00::9", ok, ok},
		{"::ffff:127.0.0.9", ok, ok}, // IPv4-mapped form of a pod IP
		// Loopback.
		{"127.0.0.1", loopback, notPod},
		{"127.0.0.5", loopback, notPod},
		{"127.255.255.254", loopback, notPod},
		{"::1", loopback, notPod},
		{"::ffff:127.0.0.5", loopback, notPod}, // IPv4-mapped loopback
		// Link-local and metadata.
		{"169.254.169.254", linkLoc, notPod},
		{"169.254.0.1", linkLoc, notPod},
		{"fe80::abcd", linkLoc, notPod},
		{"fe80::1%eth0", linkLoc, notPod},
		{"fd00:ec2::254", linkLoc, notPod},
		{"fd20:ce::254", linkLoc, notPod},
		{"100.100.100.200", linkLoc, notPod},
		{"::ffff:169.254.169.254", linkLoc, notPod},
		{"64:ff9b::a9fe:a9fe", "NAT64 for 169.254.169.254", notPod},
		{"64:ff9b::7f00:1", "NAT64 for 127.0.0.1", notPod},
		// Azure's WireServer, and Scaleway's metadata over IPv6 (issue 20).
		{"168.63.129.16", linkLoc, notPod},
		{"::ffff:168.63.129.16", linkLoc, notPod},
		{"64:ff9b::a83f:8110", "NAT64 for 168.63.129.16, which is link-local/metadata", notPod},
		{"fd00:42::42", linkLoc, notPod},
		// The local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215), in each
		// RFC 6052 layout a network may carve out of it.
		{"64:ff9b:1::a9fe:a9fe", "NAT64 for 169.254.169.254", notPod},           // /96
		{"64:ff9b:1:0:a9:fea9:fe00:0", "NAT64 for 169.254.169.254", notPod},     // /64
		{"64:ff9b:1:a9:fe:a9fe::", "NAT64 for 169.254.169.254", notPod},         // /56
		{"64:ff9b:1:a9fe:a9:fe00::", "NAT64 for 169.254.169.254", notPod},       // /48
		{"64:ff9b:1::7f00:1", "NAT64 for 127.0.0.1, which is loopback", notPod}, // /96
		{"64:ff9b:1::a14:7", "NAT64 for 10.20.0.7, which is an address of this node", notPod},
		{"64:ff9b:1::a83f:8110", "NAT64 for 168.63.129.16", notPod},
		// Akamai (Linode) metadata over IPv6, and the IPv4 forms IPv6
		// addresses carry besides NAT64 (issue 30, item 9b): 6to4,
		// IPv4-compatible, IPv4-translated.
		{"fd00:a9fe:a9fe::1", linkLoc, notPod},
		{"::a9fe:a9fe", "IPv4-compatible form of 169.254.169.254, which is link-local/metadata", notPod},
		{"::169.254.42.42", "IPv4-compatible form of 169.254.42.42", notPod},
		{"::7f00:1", "IPv4-compatible form of 127.0.0.1, which is loopback", notPod},
		{"::a14:7", "IPv4-compatible form of 10.20.0.7, which is an address of this node", notPod},
		{"::a83f:8110", "IPv4-compatible form of 168.63.129.16", notPod},
		{"::6464:64c8", "IPv4-compatible form of 100.100.100.200", notPod},
		{"2002:a9fe:a9fe::", "6to4 for 169.254.169.254, which is link-local/metadata", notPod},
		{"2002:a9fe:a9fe:1::1", "6to4 for 169.254.169.254", notPod},
		{"2002:7f00:1::1", "6to4 for 127.0.0.1, which is loopback", notPod},
		{"2002:a14:7::1", "6to4 for 10.20.0.7, which is an address of this node", notPod},
		{"2002:a83f:8110::", "6to4 for 168.63.129.16", notPod},
		{"::ffff:0:a9fe:a9fe", "IPv4-translated form of 169.254.169.254", notPod},
		{"::ffff:0:7f00:1", "IPv4-translated form of 127.0.0.1, which is loopback", notPod},
		// Unspecified addresses reach this node.
		{"0.0.0.0", unspec, notPod},
		{"::", unspec, notPod},
		// The node's own addresses.
		{"10.20.0.7", nodeAddr, notPod},
		{"2001:db8::7", nodeAddr, notPod},
		// Anything else routable.
		{"10.20.0.8", ok, notPod},
		{"192.0.2.10", ok, notPod},
		{"2001:db8::8", ok, notPod},
		{"64:ff9b::808:808", ok, notPod},
		{"64:ff9b:1::808:808", ok, notPod},      // 8.8.8.8, /96 layout
		{"64:ff9b:1:808:8:800::", ok, notPod},   // 8.8.8.8, /48 layout
		{"64:ff9b:1:0:8:808:800:0", ok, notPod}, // 8.8.8.8, /64 layout
		{"168.63.129.17", ok, notPod},
		{"fd00:42::43", ok, notPod},
		{"100.100.100.201", ok, notPod},
		{"fd00:a9fe:a9fe::2", ok, notPod},
		{"::808:808", ok, notPod},
		{"2002:808:808::1", ok, notPod},
		{"::ffff:0:808:808", ok, notPod},
	}
	check := func(t *testing.T, g *Guard, addr, want string) {
		t.Helper()
		err := g.CheckAddr(netip.MustParseAddr(addr), pod)
		if want == "" {
			if err != nil {
				t.Errorf("%s %s: refused: %v", g.Policy(), addr, err)
			}
			return
		}
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Fatalf("%s %s: err = %v; want a refusal (%s)", g.Policy(), addr, err, want)
		}
		if !strings.Contains(re.Reason, want) || re.Policy != g.Policy() {
			t.Errorf("%s %s: refusal %q; want reason %q", g.Policy(), addr, err, want)
		}
		if !strings.HasSuffix(err.Error(), ", refused by --probe-host-policy="+string(g.Policy())) {
			t.Errorf("message %q does not name the policy", err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			check(t, deny, tc.addr, tc.deny)
			check(t, podOnly, tc.addr, tc.podIPs)
			check(t, kubelet, tc.addr, ok)
			check(t, none, tc.addr, ok)
		})
	}

	// The message users see, word for word.
	err := deny.CheckAddr(netip.MustParseAddr("169.254.169.254"), pod)
	if want := "169.254.169.254 is link-local/metadata, refused by --probe-host-policy=deny-node-local"; err == nil || err.Error() != want {
		t.Errorf("message = %v; want %q", err, want)
	}
}

func TestHostGuardCheckHost(t *testing.T) {
	g := NewGuard(DenyNodeLocal, GuardOptions{InterfaceAddrs: staticAddrs()})
	pod := addrs("127.0.0.9")
	if err := g.CheckHost("127.0.0.9", pod); err != nil {
		t.Errorf("pod IP refused: %v", err)
	}
	if err := g.CheckHost("127.0.0.5", pod); err == nil {
		t.Error("loopback literal allowed")
	}
	// Names are judged by what they resolve to, when dialed.
	if err := g.CheckHost("localhost", pod); err != nil {
		t.Errorf("name checked statically: %v", err)
	}
	// No host and no pod IP would dial ":port", this node.
	if err := g.CheckHost("", pod); err == nil || !strings.Contains(err.Error(), "no host and no pod IP") {
		t.Errorf("empty host: %v", err)
	}
	if err := NewGuard(Kubelet, GuardOptions{}).CheckHost("", nil); err != nil {
		t.Errorf("kubelet policy refused an empty host: %v", err)
	}
}

// TestHostGuardRefreshesNodeAddresses: interface and Node addresses are read
// at start and refreshed on the clock; a failing source keeps what it had.
func TestHostGuardRefreshesNodeAddresses(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	var mu sync.Mutex
	ifAddrs := addrs("10.0.0.1")
	var ifErr error
	nodeAddrs := addrs("203.0.113.1")
	var nodeErr error
	g := NewGuard(DenyNodeLocal, GuardOptions{
		InterfaceAddrs: func() ([]netip.Addr, error) {
			mu.Lock()
			defer mu.Unlock()
			return ifAddrs, ifErr
		},
		NodeAddrs: func(context.Context) ([]netip.Addr, error) {
			mu.Lock()
			defer mu.Unlock()
			return nodeAddrs, nodeErr
		},
		Refresh: 30 * time.Second,
		Clock:   clk,
	})
	refused := func(a string) bool { return g.CheckAddr(netip.MustParseAddr(a), nil) != nil }
	// Interfaces are read at once; the Node only once Run starts.
	if !refused("10.0.0.1") || refused("203.0.113.1") {
		t.Fatalf("after New: node addresses %v", g.NodeAddrs())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "Node addresses", func() bool { return refused("203.0.113.1") })

	// An address added to an interface is refused after the next refresh.
	mu.Lock()
	ifAddrs = addrs("10.0.0.1", "10.0.0.2")
	mu.Unlock()
	if refused("10.0.0.2") {
		t.Fatal("new address refused before a refresh")
	}
	waitFor(t, "the ticker", clk.HasWaiters)
	clk.Step(30 * time.Second)
	waitFor(t, "refresh", func() bool { return refused("10.0.0.2") })

	// Errors keep the previous addresses; a removed address is forgotten.
	mu.Lock()
	ifAddrs, ifErr = nil, errors.New("netlink down")
	nodeAddrs, nodeErr = nil, errors.New("forbidden")
	mu.Unlock()
	clk.Step(30 * time.Second)
	time.Sleep(50 * time.Millisecond)
	if !refused("10.0.0.2") || !refused("203.0.113.1") {
		t.Fatalf("a failed refresh dropped addresses: %v", g.NodeAddrs())
	}
	mu.Lock()
	ifAddrs, ifErr = addrs("10.0.0.1"), nil
	nodeAddrs, nodeErr = nil, nil
	mu.Unlock()
	clk.Step(30 * time.Second)
	waitFor(t, "removed addresses forgotten", func() bool { return !refused("10.0.0.2") && !refused("203.0.113.1") })
}

// A hostNetwork pod's own IPs are the Node's status addresses, or its
// interfaces' while those are unknown; never a fixed node-local address.
func TestIsNodeAddr(t *testing.T) {
	ifaces := staticAddrs("127.0.0.1", "::1", "10.9.9.9", "169.254.10.1", "10.244.0.1")
	for _, policy := range []Policy{DenyNodeLocal, PodIPs} {
		g := NewGuard(policy, GuardOptions{InterfaceAddrs: ifaces,
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
	if NewGuard(Kubelet, GuardOptions{InterfaceAddrs: ifaces}).IsNodeAddr(netip.MustParseAddr("10.9.9.9")) {
		t.Error("the kubelet policy checks nothing, so knows no node address")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
