package prober

import (
	"context"
	"net"
	"net/netip"
	"strconv"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// A probe sent from inside the pod (probed.io/from Pod) opens its socket in
// the pod's own network namespace (pkg/netns) and connects to the pod's
// loopback, or to another of the pod's own addresses: nothing it sends
// leaves the pod. The host policy's node-local rules do not apply there
// (the pod's loopback is not the node's); the pod's own addresses are all
// it may reach, judged before anything is dialed and again on the exact
// address about to be connected, as for probes from the node.

// podLoopback is the default host of a probe sent from inside the pod: the
// pod's IPv4 loopback, or ::1 for a pod with only IPv6 addresses.
func podLoopback(target Target) string {
	v6 := false
	for _, s := range append([]string{target.PodIP}, target.PodIPs...) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if a.Unmap().Is4() {
			return "127.0.0.1"
		}
		v6 = true
	}
	if v6 {
		return "::1"
	}
	return "127.0.0.1"
}

// podAddr resolves a host as a probe from inside the pod writes it:
// "localhost" is the pod's loopback (as its /etc/hosts says), anything
// else must be an IP literal; no name is looked up (the node's resolver
// is not the pod's).
func (s scope) podAddr(host string) (netip.Addr, error) {
	if host == "localhost" {
		if len(s.podIPs) > 0 && !s.podIPs[0].Unmap().Is4() {
			return netip.IPv6Loopback(), nil
		}
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, &hostpolicy.RefusedError{Addr: host, Reason: "not an address of the pod"}
	}
	return a.Unmap(), s.checkPodAddr(a.Unmap())
}

// checkPodAddr allows the pod's loopback and the pod's own IPs (those the
// runtime gave its sandbox).
func (s scope) checkPodAddr(a netip.Addr) error {
	if a.IsLoopback() {
		return nil
	}
	for _, ip := range s.podIPs {
		if ip.Unmap() == a {
			return nil
		}
	}
	return &hostpolicy.RefusedError{Addr: a.String(), Reason: "not the pod's loopback or one of its IPs"}
}

// dialPod connects from inside the pod's namespace to address (host:port).
func (s scope) dialPod(ctx context.Context, network, address string, linger bool) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	a, err := s.podAddr(host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var control func(uintptr)
	if linger {
		control = setLinger
	}
	return s.ns.DialTCP(ctx, netip.AddrPortFrom(a, uint16(p)), control)
}
