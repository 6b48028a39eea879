package prober

import "fmt"

// DefaultUserAgentVersion is the Kubernetes minor release probed mimics in
// the User-Agent of its HTTP and gRPC probes.
const DefaultUserAgentVersion = "1.34"

// Options configures a Prober. The zero value is valid.
type Options struct {
	// UserAgentVersion is "<major>.<minor>", sent as "kube-probe/<major>.<minor>"
	// so that applications which special-case the kubelet's probes keep working.
	// Empty means DefaultUserAgentVersion.
	UserAgentVersion string
	// HostGuard applies --probe-host-policy to every connection of an
	// httpGet, tcpSocket or grpc probe, redirects included. Nil checks
	// nothing, as the kubelet does.
	HostGuard *HostGuard
}

// userAgent returns the User-Agent probes send, as the kubelet does.
func (o Options) userAgent() string {
	v := o.UserAgentVersion
	if v == "" {
		v = DefaultUserAgentVersion
	}
	return fmt.Sprintf("kube-probe/%s", v)
}
