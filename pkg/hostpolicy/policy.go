// Package hostpolicy holds --probe-host-policy: which addresses network
// probes (and httpGet lifecycle hooks) may connect to, the fixed node-local
// addresses the default policy refuses, and the Guard that judges an
// address against them. It judges and never dials: the prober's dialer asks
// the Guard about each address right before connect(2), and the manager, the
// webhook and the converter ask it about hosts written as IP literals. A leaf,
// so that those that only validate a probe link no prober.
package hostpolicy

import "fmt"

// Policy says which addresses network probes may connect to
// (--probe-host-policy). See docs/security.md.
//
// The kubelet lets httpGet.host, tcpSocket.host and HTTP redirects point
// anywhere the node can reach. probed runs with hostNetwork, so that includes
// the node's loopback services and the cloud metadata endpoint: anyone who
// can create a pod could make probed fetch them, and read a piece of the
// answer back in events and conditions (kubernetes issue 99425).
type Policy string

const (
	// DenyNodeLocal, the default, refuses link-local and cloud
	// metadata addresses, loopback, unspecified addresses and every address
	// of the node itself, unless the address is one of the pod's own IPs.
	// Everything else routable is allowed.
	DenyNodeLocal Policy = "deny-node-local"
	// PodIPs allows only the pod's own IPs: those the node's
	// runtime gave its sandbox, or a hostNetwork pod's node addresses
	// (see the prober's Target.PodIPsVerified).
	PodIPs Policy = "pod-ips"
	// Kubelet checks nothing, exactly as the kubelet.
	Kubelet Policy = "kubelet"
)

// Parse parses a --probe-host-policy value; the empty string is
// the default, DenyNodeLocal. Values are case-sensitive.
func Parse(s string) (Policy, error) {
	switch Policy(s) {
	case "", DenyNodeLocal:
		return DenyNodeLocal, nil
	case PodIPs, Kubelet:
		return Policy(s), nil
	}
	return "", fmt.Errorf("invalid probe host policy %q: must be one of %q, %q or %q",
		s, DenyNodeLocal, PodIPs, Kubelet)
}

// String returns the flag spelling; the zero value prints as the default.
func (p Policy) String() string {
	if p == "" {
		return string(DenyNodeLocal)
	}
	return string(p)
}

// Set parses v into p, so that *Policy is a flag.Value.
func (p *Policy) Set(v string) error {
	parsed, err := Parse(v)
	if err != nil {
		return err
	}
	*p = parsed
	return nil
}

// Type names the flag's value type for pflag's help output.
func (p Policy) Type() string { return "hostPolicy" }
