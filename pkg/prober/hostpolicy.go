package prober

import "fmt"

// HostPolicy says which addresses network probes may connect to
// (--probe-host-policy). See docs/security.md.
//
// The kubelet lets httpGet.host, tcpSocket.host and HTTP redirects point
// anywhere the node can reach. probed runs with hostNetwork, so that includes
// the node's loopback services and the cloud metadata endpoint: anyone who
// can create a pod could make probed fetch them, and read a piece of the
// answer back in events and conditions (kubernetes issue 99425).
type HostPolicy string

const (
	// HostPolicyDenyNodeLocal, the default, refuses link-local and cloud
	// metadata addresses, loopback, unspecified addresses and every address
	// of the node itself, unless the address is one of the pod's own IPs.
	// Everything else routable is allowed.
	HostPolicyDenyNodeLocal HostPolicy = "deny-node-local"
	// HostPolicyPodIPs allows only the pod's own IPs: those the node's
	// runtime gave its sandbox, or a hostNetwork pod's node addresses
	// (see Target.PodIPsVerified).
	HostPolicyPodIPs HostPolicy = "pod-ips"
	// HostPolicyKubelet checks nothing, exactly as the kubelet.
	HostPolicyKubelet HostPolicy = "kubelet"
)

// ParseHostPolicy parses a --probe-host-policy value; the empty string is
// the default, HostPolicyDenyNodeLocal. Values are case-sensitive.
func ParseHostPolicy(s string) (HostPolicy, error) {
	switch HostPolicy(s) {
	case "", HostPolicyDenyNodeLocal:
		return HostPolicyDenyNodeLocal, nil
	case HostPolicyPodIPs, HostPolicyKubelet:
		return HostPolicy(s), nil
	}
	return "", fmt.Errorf("invalid probe host policy %q: must be one of %q, %q or %q",
		s, HostPolicyDenyNodeLocal, HostPolicyPodIPs, HostPolicyKubelet)
}

// String returns the flag spelling; the zero value prints as the default.
func (p HostPolicy) String() string {
	if p == "" {
		return string(HostPolicyDenyNodeLocal)
	}
	return string(p)
}

// Set parses v into p, so that *HostPolicy is a flag.Value.
func (p *HostPolicy) Set(v string) error {
	parsed, err := ParseHostPolicy(v)
	if err != nil {
		return err
	}
	*p = parsed
	return nil
}

// Type names the flag's value type for pflag's help output.
func (p HostPolicy) Type() string { return "hostPolicy" }
