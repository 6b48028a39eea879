package prober

import (
	"context"
	"net"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// tcpProber checks that a TCP connection can be opened, then closes it, as
// the kubelet's DoTCPProbe does. Its close is the kubelet's FIN without the
// kubelet's SO_LINGER, so it does not block the goroutine (see
// scope.dialer), or with --tcp-probe-close=rst a reset.
type tcpProber struct {
	guard *hostpolicy.Guard
	rst   bool
}

// run carries out one tcpSocket probe. A failed dial, timeout included, is
// a Failure whose output is the dial error text; only a connection the
// host policy refuses, and a port that does not resolve, are errors.
func (p *tcpProber) run(ctx context.Context, action *v1.TCPSocketAction, target Target, timeout time.Duration) (Result, string, error) {
	port, err := resolvePort(action.Port, target.Ports)
	if err != nil {
		klog.V(4).InfoS("TCP probe port could not be resolved", "err", err)
		return Unknown, "", err
	}
	host := action.Host
	if host == "" {
		host = target.PodIP
	}
	sc := scopeOf(p.guard, target)
	if err := sc.checkHost(host); err != nil {
		return Unknown, "", err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	if v := klog.V(4); v.Enabled() {
		v.InfoS("TCP probe", "addr", addr, "timeout", timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := sc.dial(false)(ctx, "tcp", addr)
	if err != nil {
		if hostpolicy.IsRefused(err) {
			return Unknown, "", err
		}
		return Failure, err.Error(), nil
	}
	if p.rst {
		// SO_LINGER 0: close(2) sends an RST and frees the socket at once.
		_ = conn.(*net.TCPConn).SetLinger(0)
	}
	if err := conn.Close(); err != nil {
		klog.V(4).InfoS("Closing TCP probe socket failed", "addr", addr, "err", err)
	}
	return Success, "", nil
}
