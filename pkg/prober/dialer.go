package prober

import (
	"context"
	"net"
	"syscall"
)

// newProbeDialer returns the dialer every network probe uses. Probes open a
// connection per check, so on busy nodes their sockets would pile up in
// TIME-WAIT for the OS default of 60s; a 1s SO_LINGER (not 0, which would
// reset the connection instead of closing it cleanly) keeps that short, as
// the kubelet's ProbeDialer does (kubernetes issue 89898). In fact SO_LINGER
// does not shorten TIME-WAIT on Linux; it only makes close(2) block until
// the FIN is acknowledged, which is why the TCP prober and the HTTP fast
// path use newFINDialer instead.
//
// KeepAlive -1: a probe connection lives for milliseconds, so the four
// keep-alive setsockopts per dial would be pure cost.
func newProbeDialer() *net.Dialer {
	return &net.Dialer{Control: lingerControl, KeepAlive: -1}
}

// newFINDialer is the probe dialer without SO_LINGER: close(2) returns at
// once and the kernel sends the FIN in the background. On the wire it is
// the kubelet's close (a FIN, never an RST) whenever no unsent data is left,
// which holds for a TCP probe and for the HTTP fast path (it closes after
// the server's EOF). guard (which may be nil) checks every connection.
func newFINDialer(g *HostGuard) *net.Dialer {
	d := &net.Dialer{KeepAlive: -1}
	if g.active() {
		d.ControlContext = func(ctx context.Context, _, address string, _ syscall.RawConn) error {
			return checkDialAddr(ctx, g, address)
		}
	}
	return d
}
