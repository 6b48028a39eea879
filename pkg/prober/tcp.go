package prober

import (
	"context"
	"net"
	"net/netip"
	"time"

	"k8s.io/klog/v2"
)

// tcpProber checks that a TCP connection can be opened, then closes it.
type tcpProber struct {
	dialer *net.Dialer
	rst    bool
}

// newTCPProber returns the TCP prober; guard (which may be nil) checks
// every connection. Its sockets carry no SO_LINGER (see newFINDialer): the
// close is the kubelet's FIN but does not block the goroutine on it.
func newTCPProber(guard *HostGuard, mode TCPCloseMode) *tcpProber {
	return &tcpProber{dialer: newFINDialer(guard), rst: mode == TCPCloseRST}
}

// probe dials addr within timeout. A failed dial, timeout included, is a
// Failure whose output is the dial error text; only a connection the host
// policy refuses is an error.
func (p *tcpProber) probe(ctx context.Context, addr string, timeout time.Duration) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := p.dial(ctx, addr)
	if err != nil {
		if isRefused(err) {
			return Unknown, "", err
		}
		return Failure, err.Error(), nil
	}
	if p.rst {
		// SO_LINGER 0: close(2) sends an RST and frees the socket at once.
		_ = conn.SetLinger(0)
	}
	if err := conn.Close(); err != nil {
		klog.V(4).InfoS("Closing TCP probe socket failed", "addr", addr, "err", err)
	}
	return Success, "", nil
}

// dial skips the resolver for an IP literal; the errors read the same.
func (p *tcpProber) dial(ctx context.Context, addr string) (*net.TCPConn, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil && plainAddr(ap.Addr()) {
		c, err := p.dialer.DialTCP(ctx, "tcp", netip.AddrPort{}, ap)
		return c, dropAnySource(err)
	}
	c, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// plainAddr is an address that net formats the same way from a
// netip.Addr as from its text: no zone, no IPv4-mapped IPv6.
func plainAddr(a netip.Addr) bool {
	return a.Zone() == "" && !a.Is4In6()
}

// dropAnySource removes the unspecified local address DialTCP puts in its
// errors ("dial tcp :0->a:p: ..."), which DialContext's texts do not name.
func dropAnySource(err error) error {
	if oe, ok := err.(*net.OpError); ok {
		if src, ok := oe.Source.(*net.TCPAddr); ok && src.IP == nil && src.Port == 0 {
			oe.Source = nil
		}
	}
	return err
}
