package prober

import (
	"fmt"

	"github.com/probed-dev/probed/pkg/hostpolicy"
)

// DefaultUserAgentVersion is the Kubernetes minor release probed mimics in
// the User-Agent of its HTTP and gRPC probes when the node's kubelet version
// cannot be read: 1.37, the newest release this build is tested against.
const DefaultUserAgentVersion = "1.37"

// Options configures a Prober. The zero value is valid.
type Options struct {
	// UserAgent is the version sent as "kube-probe/<major>.<minor>", so
	// that applications which special-case the kubelet's probes keep
	// working; each probe reads it, so a change applies to the next ones.
	// Nil means DefaultUserAgentVersion.
	UserAgent *UserAgent
	// HostGuard applies --probe-host-policy to every connection of an
	// httpGet, tcpSocket or grpc probe, redirects included. Nil checks
	// nothing, as the kubelet does.
	HostGuard *hostpolicy.Guard
	// TCPClose is how tcpSocket probes close their connection (--tcp-probe-close).
	// Empty means TCPCloseFIN.
	TCPClose TCPCloseMode
	// TLS is where probed.io/tls finds trust and client certificates.
	TLS TLSOptions
}

// TCPCloseMode is how a tcpSocket probe ends its connection.
type TCPCloseMode string

const (
	// TCPCloseFIN closes gracefully, as the kubelet does; the prober's side
	// keeps the socket in TIME-WAIT for 60s.
	TCPCloseFIN TCPCloseMode = "fin"
	// TCPCloseRST resets the connection (SO_LINGER 0): no TIME-WAIT and about
	// a third less CPU, but the application sees "connection reset by peer".
	TCPCloseRST TCPCloseMode = "rst"
)

// ParseTCPCloseMode accepts "fin" and "rst"; "" means fin.
func ParseTCPCloseMode(s string) (TCPCloseMode, error) {
	switch m := TCPCloseMode(s); m {
	case "", TCPCloseFIN:
		return TCPCloseFIN, nil
	case TCPCloseRST:
		return m, nil
	}
	return "", fmt.Errorf("unknown TCP probe close %q: want fin or rst", s)
}
