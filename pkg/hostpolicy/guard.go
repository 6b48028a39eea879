package hostpolicy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultNodeAddressRefresh is how often a Guard rereads the node's
// own addresses.
const DefaultNodeAddressRefresh = time.Minute

// RefusedError is a probe address the host policy refuses. Nothing is sent
// to a refused address: it is refused before connect(2).
type RefusedError struct {
	// Addr is the refused address as text; empty for a probe with no host
	// and no pod IP.
	Addr string
	// Reason says what the address is, e.g. "loopback" or "link-local/metadata".
	Reason string
	// Policy is the policy that refused it; empty for a probe sent from
	// inside the pod, which reaches only the pod's own addresses.
	Policy Policy
}

func (e *RefusedError) Error() string {
	if e.Policy == "" {
		// Not the host policy's: a probe sent from inside the pod.
		return fmt.Sprintf("%s is %s, refused: a probe sent from inside the pod (probed.io/from Pod) reaches only the pod's loopback and its own IPs", e.Addr, e.Reason)
	}
	if e.Addr == "" {
		return fmt.Sprintf("%s, refused by --probe-host-policy=%s", e.Reason, e.Policy)
	}
	return fmt.Sprintf("%s is %s, refused by --probe-host-policy=%s", e.Addr, e.Reason, e.Policy)
}

// IsRefused reports whether err, however wrapped (url.Error, net.OpError),
// is a host policy refusal.
func IsRefused(err error) bool {
	var re *RefusedError
	return errors.As(err, &re)
}

// Reasons a RefusedError gives.
const (
	refusedLinkLocal   = "link-local/metadata"
	refusedLoopback    = "loopback"
	refusedUnspecified = "unspecified (it reaches this node)"
	refusedNode        = "an address of this node"
	refusedNotPodIP    = "not one of the pod's IPs"
	refusedNoHost      = "no host and no pod IP (that reaches this node)"
)

// GuardOptions configures a Guard. The zero value is valid.
type GuardOptions struct {
	// InterfaceAddrs lists the addresses of the node's network interfaces.
	// probed runs with hostNetwork, so its interfaces are the node's. Nil
	// means every address of every local interface (net.InterfaceAddrs).
	InterfaceAddrs func() ([]netip.Addr, error)
	// NodeAddrs optionally lists the Node object's status.addresses, which
	// may include addresses that are not on any interface (a cloud's
	// ExternalIP behind NAT). Nil means none.
	NodeAddrs func(ctx context.Context) ([]netip.Addr, error)
	// Refresh is how often Run rereads both; DefaultNodeAddressRefresh when zero.
	Refresh time.Duration
	// Clock defaults to the real clock.
	Clock clock.WithTicker
}

// Guard applies a Policy to the addresses network probes connect
// to. It is safe for concurrent use; a nil *Guard checks nothing, like
// Kubelet.
//
// The guard judges addresses, never names: a host name is resolved once, by
// the dialer, and each resolved address is checked on the socket right
// before it connects, so a name cannot resolve to one address for the check
// and another for the connection (DNS rebinding). HTTP redirects are dialed
// the same way, and a redirect to a refused address literal is refused
// outright.
type Guard struct {
	policy  Policy
	opts    GuardOptions
	refresh time.Duration
	clock   clock.WithTicker
	// node holds the node's own addresses, replaced whole on refresh.
	node atomic.Pointer[map[netip.Addr]bool]
	// nodeStatus holds the Node's status.addresses alone: those the
	// kubelet gives a hostNetwork pod as its IPs.
	nodeStatus atomic.Pointer[map[netip.Addr]bool]
}

// NewGuard returns a guard for policy. It reads the interface addresses
// at once (cheap, local), so the guard is never empty; Run adds the Node's
// addresses and refreshes both.
func NewGuard(policy Policy, o GuardOptions) *Guard {
	if policy == "" {
		policy = DenyNodeLocal
	}
	if o.InterfaceAddrs == nil {
		o.InterfaceAddrs = InterfaceAddrs
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	refresh := o.Refresh
	if refresh <= 0 {
		refresh = DefaultNodeAddressRefresh
	}
	g := &Guard{policy: policy, opts: o, refresh: refresh, clock: o.Clock}
	empty := map[netip.Addr]bool{}
	g.node.Store(&empty)
	g.nodeStatus.Store(&empty)
	if g.needsNodeAddrs() {
		g.load(context.Background(), false)
	}
	return g
}

// Policy returns the guard's policy; Kubelet for a nil guard.
func (g *Guard) Policy() Policy {
	if g == nil {
		return Kubelet
	}
	return g.policy
}

// Active reports whether the guard checks anything: false for a nil guard
// and for the kubelet policy.
func (g *Guard) Active() bool { return g != nil && g.policy != Kubelet }

// needsNodeAddrs: deny-node-local refuses the node's addresses, and both
// policies that check tell a hostNetwork pod's own IPs by them.
func (g *Guard) needsNodeAddrs() bool { return g.Active() }

// Run refreshes the node's addresses now and then every Refresh, until ctx
// ends. It returns at once when the policy does not use them.
func (g *Guard) Run(ctx context.Context) {
	if !g.needsNodeAddrs() {
		return
	}
	g.Refresh(ctx)
	t := g.clock.NewTicker(g.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			g.Refresh(ctx)
		}
	}
}

// Refresh rereads the interface and Node addresses. A source that fails
// keeps its share of the previous set, so a transient error never opens the
// guard.
func (g *Guard) Refresh(ctx context.Context) {
	if g.needsNodeAddrs() {
		g.load(ctx, true)
	}
}

func (g *Guard) load(ctx context.Context, withNode bool) {
	prev := *g.node.Load()
	next := map[netip.Addr]bool{}
	ifAddrs, err := g.opts.InterfaceAddrs()
	if err != nil {
		klog.ErrorS(err, "Reading the node's interface addresses; keeping the previous ones")
		maps.Copy(next, prev)
	}
	for _, a := range ifAddrs {
		next[canonical(a)] = true
	}
	if withNode && g.opts.NodeAddrs != nil {
		nodeAddrs, err := g.opts.NodeAddrs(ctx)
		if err != nil {
			klog.V(2).InfoS("Reading the Node's status addresses; keeping the previous ones", "err", err)
			maps.Copy(next, prev)
		} else {
			status := map[netip.Addr]bool{}
			for _, a := range nodeAddrs {
				status[canonical(a)] = true
			}
			g.nodeStatus.Store(&status)
		}
		for _, a := range nodeAddrs {
			next[canonical(a)] = true
		}
	}
	if !maps.Equal(prev, next) {
		klog.V(2).InfoS("Node addresses for the probe host policy", "policy", g.policy, "addresses", sortedAddrs(next))
	}
	g.node.Store(&next)
}

// IsNodeAddr reports whether addr may be a hostNetwork pod's own IP,
// which the kubelet takes from the Node's status.addresses: one of those,
// or, while the Node's are unknown, of the node's interfaces; never a
// loopback, link-local, metadata or other fixed node-local address. A
// writer of pods/status may put any address in a hostNetwork pod's
// status.podIPs; only these are the pod's own. It is false for a guard
// that checks nothing.
func (g *Guard) IsNodeAddr(addr netip.Addr) bool {
	if !g.Active() {
		return false
	}
	a := canonical(addr)
	if fixedNodeLocal(a) != "" {
		return false
	}
	if status := *g.nodeStatus.Load(); len(status) > 0 {
		return status[a]
	}
	return (*g.node.Load())[a]
}

// NodeAddrs returns the node addresses the guard currently refuses, sorted.
func (g *Guard) NodeAddrs() []netip.Addr {
	if g == nil {
		return nil
	}
	return sortedAddrs(*g.node.Load())
}

func sortedAddrs(m map[netip.Addr]bool) []netip.Addr {
	return slices.SortedFunc(maps.Keys(m), netip.Addr.Compare)
}

// InterfaceAddrs lists the addresses of every local network interface,
// whether up or down.
func InterfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if p, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// canonical drops an IPv6 zone and unmaps an IPv4-mapped IPv6 address, so
// that ::ffff:127.0.0.1 is judged as the 127.0.0.1 it reaches.
func canonical(a netip.Addr) netip.Addr { return a.WithZone("").Unmap() }

// ParsePodIPs parses pod IPs as written in status.podIPs, skipping blanks
// and anything that is not an IP.
func ParsePodIPs(ips ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ips))
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, canonical(a))
		}
	}
	return out
}

// CheckAddr returns a *RefusedError if a probe of a pod with podIPs may not
// connect to addr, and nil if it may.
func (g *Guard) CheckAddr(addr netip.Addr, podIPs []netip.Addr) error {
	if !g.Active() {
		return nil
	}
	a := canonical(addr)
	for _, p := range podIPs {
		if canonical(p) == a {
			return nil // the pod's own IPs are always allowed
		}
	}
	if g.policy == PodIPs {
		return &RefusedError{Addr: addr.String(), Reason: refusedNotPodIP, Policy: g.policy}
	}
	if reason := g.nodeLocal(a); reason != "" {
		return &RefusedError{Addr: addr.String(), Reason: reason, Policy: g.policy}
	}
	return nil
}

// nodeLocal says why deny-node-local refuses a canonical address, or "":
// the fixed rules (table.go), the node's own addresses, and
// either of those carried in an IPv6 address (NAT64, 6to4, ...).
func (g *Guard) nodeLocal(a netip.Addr) string {
	if r := fixedNodeLocal(a); r != "" {
		return r
	}
	if (*g.node.Load())[a] {
		return refusedNode
	}
	for _, v4 := range v4InV6(a) {
		if r := g.nodeLocal(v4.addr); r != "" {
			return fmt.Sprintf("%s %s, which is %s", v4.via, v4.addr, r)
		}
	}
	return ""
}

// CheckHost checks a probe's host as written (httpGet.host, a redirect's
// host, or the pod IP when the probe names none). An IP literal is checked;
// an empty host, which would reach this node, is refused; a name returns nil
// because names are only judged by the addresses they resolve to, when the
// probe dials them.
func (g *Guard) CheckHost(host string, podIPs []netip.Addr) error {
	if !g.Active() {
		return nil
	}
	if host == "" {
		return &RefusedError{Reason: refusedNoHost, Policy: g.policy}
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	return g.CheckAddr(a, podIPs)
}
