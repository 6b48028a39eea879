package prober

import (
	"context"
	"net"
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

// dial connects to addr. Not Dialer.DialTCP, although it would skip the
// resolver for an IP literal: its local address is never nil, so it
// bind(2)s to port 0 before connecting, and that port search cannot reuse
// the prober's own TIME-WAIT ports the way connect(2)'s choice does. Under
// a high probe rate it cost ~1 ms of kernel CPU per probe and would run out
// of ports.
func (p *tcpProber) dial(ctx context.Context, addr string) (*net.TCPConn, error) {
	c, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}
