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
}

// newTCPProber returns the TCP prober; guard (which may be nil) checks
// every connection.
func newTCPProber(guard *HostGuard) *tcpProber {
	return &tcpProber{dialer: newGuardedDialer(guard)}
}

// probe dials addr within timeout. A failed dial, timeout included, is a
// Failure whose output is the dial error text; only a connection the host
// policy refuses is an error.
func (p *tcpProber) probe(ctx context.Context, addr string, timeout time.Duration) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		if isRefused(err) {
			return Unknown, "", err
		}
		return Failure, err.Error(), nil
	}
	if err := conn.Close(); err != nil {
		klog.V(4).InfoS("Closing TCP probe socket failed", "addr", addr, "err", err)
	}
	return Success, "", nil
}
