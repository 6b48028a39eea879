package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// dialScope is what the probe dialer needs to judge a connection: the
// guard and the IPs of the pod being probed. Prober.Probe puts it in the
// probe's context; the dialer finds it there for the first connection and
// for every redirect.
type dialScope struct {
	guard  *HostGuard
	podIPs []netip.Addr
}

type dialScopeKey struct{}

// withDialScope returns ctx carrying the guard and target's pod IPs, or ctx
// itself when the guard checks nothing.
func withDialScope(ctx context.Context, g *HostGuard, target Target) context.Context {
	if !g.active() {
		return ctx
	}
	ips := ParsePodIPs(target.PodIPs...)
	if pod := ParsePodIPs(target.PodIP); len(pod) == 1 && !containsAddr(ips, pod[0]) {
		ips = append(ips, pod[0])
	}
	return context.WithValue(ctx, dialScopeKey{}, &dialScope{guard: g, podIPs: ips})
}

// copyDialScope copies from's scope, if any, into to: for dials that run
// under a context of their own (gRPC's).
func copyDialScope(to, from context.Context) context.Context {
	if s, ok := from.Value(dialScopeKey{}).(*dialScope); ok {
		return context.WithValue(to, dialScopeKey{}, s)
	}
	return to
}

func scopeFrom(ctx context.Context) (*dialScope, bool) {
	s, ok := ctx.Value(dialScopeKey{}).(*dialScope)
	return s, ok
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if b == a {
			return true
		}
	}
	return false
}

// checkHost applies the probe's scope to a host as written; nil without a scope.
func checkHost(ctx context.Context, host string) error {
	s, ok := scopeFrom(ctx)
	if !ok {
		return nil
	}
	return s.guard.CheckHost(host, s.podIPs)
}

// errNoDialScope guards against a probe path that forgot its scope: with
// an active policy such a connection is refused rather than left unchecked.
var errNoDialScope = errors.New("probe connection without a host policy scope refused (a bug in probed)")

// guardedControl returns the probe dialer's ControlContext. It runs on the
// socket after the name (if any) was resolved and right before connect(2),
// with the exact address about to be connected: that is the address the
// policy judges, so nothing is ever sent to a refused one. Then it sets
// SO_LINGER as lingerControl does.
func guardedControl(g *HostGuard) func(ctx context.Context, network, address string, c syscall.RawConn) error {
	return func(ctx context.Context, network, address string, c syscall.RawConn) error {
		if err := checkDialAddr(ctx, g, address); err != nil {
			return err
		}
		return lingerControl(network, address, c)
	}
}

// checkDialAddr is guardedControl's policy check alone.
func checkDialAddr(ctx context.Context, g *HostGuard, address string) error {
	if !g.active() {
		return nil
	}
	s, ok := scopeFrom(ctx)
	if !ok {
		return errNoDialScope
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("probe connection to %q refused: %w", address, err)
	}
	return s.guard.CheckAddr(ap.Addr(), s.podIPs)
}

// isRefused reports whether err, however wrapped (url.Error, net.OpError),
// is a host policy refusal.
func isRefused(err error) bool {
	var re *RefusedError
	return errors.As(err, &re) || errors.Is(err, errNoDialScope)
}

// newGuardedDialer returns the probe dialer with the guard's check on every
// connection; a nil or kubelet guard gives newProbeDialer's dialer.
func newGuardedDialer(g *HostGuard) *net.Dialer {
	if !g.active() {
		return newProbeDialer()
	}
	return &net.Dialer{ControlContext: guardedControl(g), KeepAlive: -1}
}
