package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"syscall"

	"github.com/probed-dev/probed/pkg/hostpolicy"
	"github.com/probed-dev/probed/pkg/netns"
)

// Every connection a network probe opens is dialed by a net.Dialer made
// here, and every one of them passes the host policy: the dialer's
// ControlContext runs after the name (if any) was resolved and right before
// connect(2), with the exact address about to be connected, so nothing is
// ever sent to an address the policy refuses. The pod whose probe it is
// (its IPs are always allowed) is bound into the dialer as a scope; it
// never travels in a context.

// scope is what the host policy needs to judge one probe's connections: the
// guard and the probed pod's own IPs. A nil guard, or the kubelet policy,
// checks nothing.
type scope struct {
	guard  *hostpolicy.Guard
	podIPs []netip.Addr
	// ns is the pod's network namespace for a probe sent from inside the
	// pod (dialer_pod.go); nil for probes from the node.
	ns *netns.NS
}

// scopeOf returns the scope of probes of target's pod: its IPs, and the
// pod IP unless the IPs were verified without it.
func scopeOf(g *hostpolicy.Guard, target Target) scope {
	if target.ns != nil {
		// From inside the pod: its loopback and the IPs its runtime
		// gave it, whatever the host policy.
		var ips []netip.Addr
		if target.PodIPsVerified {
			ips = hostpolicy.ParsePodIPs(target.PodIPs...)
		}
		return scope{ns: target.ns, podIPs: ips}
	}
	if !g.Active() {
		return scope{}
	}
	ips := hostpolicy.ParsePodIPs(target.PodIPs...)
	if pod := hostpolicy.ParsePodIPs(target.PodIP); !target.PodIPsVerified && len(pod) == 1 && !slices.Contains(ips, pod[0]) {
		ips = append(ips, pod[0])
	}
	return scope{guard: g, podIPs: ips}
}

func (s scope) active() bool { return s.ns != nil || s.guard.Active() }

// checkHost judges a host as written (httpGet.host, tcpSocket.host, a
// redirect's host or the pod IP) before anything is dialed: an IP literal,
// or no host at all, is refused at once; a name is judged when it is
// dialed, by the addresses it resolves to.
func (s scope) checkHost(host string) error {
	if s.ns != nil {
		_, err := s.podAddr(host)
		return err
	}
	if !s.active() {
		return nil
	}
	return s.guard.CheckHost(host, s.podIPs)
}

// checkAddr judges the address a dialer is about to connect to.
func (s scope) checkAddr(address string) error {
	if !s.active() {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("probe connection to %q refused: %w", address, err)
	}
	if s.ns != nil {
		return s.checkPodAddr(ap.Addr().Unmap())
	}
	return s.guard.CheckAddr(ap.Addr(), s.podIPs)
}

// dial returns the function the scope's connections are dialed with: a
// dialer's (see dialer) for probes from the node, dialPod for probes from
// inside the pod.
func (s scope) dial(linger bool) func(ctx context.Context, network, address string) (net.Conn, error) {
	if s.ns != nil {
		return func(ctx context.Context, network, address string) (net.Conn, error) {
			return s.dialPod(ctx, network, address, linger)
		}
	}
	return s.dialer(linger).DialContext
}

// dialer returns the dialer for the scope's connections.
//
// With linger it is the kubelet's ProbeDialer: SO_LINGER 1s, which the
// kubelet sets hoping to shorten TIME-WAIT (kubernetes issue 89898); on
// Linux it only makes close(2) wait until the FIN is acknowledged. Without
// it, close(2) returns at once and the kernel sends the same FIN in the
// background: the TCP prober's close, which sends nothing after the
// handshake and so has no unsent data a FIN could lose.
//
// KeepAlive -1: a probe's connection lives for milliseconds (or, kept
// alive, is used every period), so the four keep-alive setsockopts per dial
// would be pure cost.
func (s scope) dialer(linger bool) *net.Dialer {
	d := &net.Dialer{KeepAlive: -1}
	switch {
	case s.active():
		d.ControlContext = func(_ context.Context, network, address string, c syscall.RawConn) error {
			if err := s.checkAddr(address); err != nil {
				return err
			}
			if linger {
				return lingerControl(network, address, c)
			}
			return nil
		}
	case linger:
		d.Control = lingerControl
	}
	return d
}

// redirectPolicy is an http.Client's CheckRedirect: the kubelet's rule
// (RedirectChecker(false): the same host only, any port, at most 10), then
// the host policy on the redirect's host as written. A redirect to a name
// is judged when it is dialed, by the addresses the name resolves to.
func (s scope) redirectPolicy(req *http.Request, via []*http.Request) error {
	// A redirect to another host is never followed (the kubelet's Warning),
	// so it sends nothing anywhere and needs no policy check.
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	if err := s.checkHost(req.URL.Hostname()); err != nil {
		return fmt.Errorf("redirect refused: %w", err)
	}
	return nil
}

// maxRedirects is how many requests one probe may make, as in Go's and the
// kubelet's redirect policy: the 10th redirect in a row is refused.
const maxRedirects = 10
